{{- define "wsl-gpu-hook.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "wsl-gpu-hook.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "wsl-gpu-hook.labels" -}}
app.kubernetes.io/name: {{ include "wsl-gpu-hook.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "wsl-gpu-hook.selector" -}}
app.kubernetes.io/name: {{ include "wsl-gpu-hook.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "wsl-gpu-hook.serviceAccount" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "wsl-gpu-hook.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- /* repository@digest when a digest is set (the image a pod runs is then
exactly that one), repository:tag otherwise. */}}
{{- define "wsl-gpu-hook.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{- define "wsl-gpu-hook.resourceName" -}}
{{- if and . (not (regexMatch "^([a-z0-9]([-a-z0-9]*[a-z0-9])?\\.)+[a-z]{2,}/[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$" .)) -}}
{{- fail (printf "resources: %q is not an extended resource name (domain/name, e.g. nvidia.com/gpu), or \"\" to advertise none" .) -}}
{{- end -}}
{{- . | quote -}}
{{- end -}}
