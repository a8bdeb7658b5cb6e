# bash completion for wsl-gpu-ctl                          -*- shell-script -*-
# Installed as /usr/share/bash-completion/completions/wsl-gpu-ctl.
# The commands, verbs, engines and flags here are the binary's command
# table: cmd/wsl-gpu-ctl/docs_test.go runs this script against it.

_wsl_gpu_ctl() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
	# The command and cdi's verb typed so far; `help COMMAND` completes
	# as COMMAND does, without flags.
	local i w cmd='' verb='' help=''
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		case $w in
		--config | -config) ((i++)) ;;
		-*) ;;
		*)
			if [[ -z $cmd ]]; then
				cmd=$w
			elif [[ $cmd == help && -z $help ]]; then
				cmd=$w help=1
			elif [[ $cmd == cdi && -z $verb ]]; then
				verb=$w
			fi
			;;
		esac
	done

	# The value of a flag that takes one.
	case $prev in
	--config | --output | --web-config-file | --hook)
		COMPREPLY=($(compgen -f -- "$cur"))
		return
		;;
	--root | --dir | --prefix | --hook-dir | --cdi-dir)
		COMPREPLY=($(compgen -d -- "$cur"))
		return
		;;
	--kind | --skip-kind)
		COMPREPLY=($(compgen -W 'wsl-gpu-hook.dev/gpu nvidia.com/gpu amd.com/gpu' -- "$cur"))
		return
		;;
	--nvidia-kind | --amd-kind)
		COMPREPLY=($(compgen -W 'ours skip' -- "$cur"))
		return
		;;
	--interval | --listen | --image)
		return
		;;
	esac

	local flags='' words=''
	case $cmd in
	'') flags='--config' words='info doctor cdi install uninstall top metrics version help' ;;
	info) flags='--json --k8s' ;;
	doctor) flags='--json --k8s --root' ;;
	cdi)
		if [[ -z $verb ]]; then
			words='generate keep'
		elif [[ $verb == keep ]]; then
			flags='--dir --hook-dir --interval --once --remove'
		else
			flags='--dir --hook --kind --output --skip-kind'
		fi
		;;
	install | uninstall)
		flags='--amd-kind --cdi-dir --dry-run --hook --image --nvidia-kind --prefix --user'
		words='docker podman containerd cdi docker-desktop'
		;;
	top) flags='--interval --json --once' ;;
	metrics) flags='--interval --listen --web-config-file' ;;
	version) ;;
	help) words='info doctor cdi install uninstall top metrics version' ;;
	*) return ;;
	esac
	if [[ -n $help || $cmd == help ]]; then
		[[ $cmd == cdi && -z $verb ]] || [[ $cmd == help ]] || return
		COMPREPLY=($(compgen -W "$words" -- "$cur"))
		return
	fi
	flags+=' --help'
	if [[ $cur == -* || -z $words ]]; then
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
	else
		COMPREPLY=($(compgen -W "$words" -- "$cur"))
	fi
} &&
	complete -F _wsl_gpu_ctl wsl-gpu-ctl
