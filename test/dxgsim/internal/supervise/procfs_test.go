package supervise

import "testing"

func TestParseStat(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want stat
		err  bool
	}{
		{
			name: "plain",
			in:   "4242 (dxgprobe) S 1 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0",
			want: stat{comm: "dxgprobe", state: 'S', start: 987654},
		},
		{
			name: "comm with spaces and parentheses",
			in:   "7 (a) b (c) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0",
			want: stat{comm: "a) b (c", state: 'Z', start: 55},
		},
		{name: "truncated", in: "7 (x) S 1 2 3", err: true},
		{name: "no comm", in: "7 x S", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat(tt.in)
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("parseStat = %+v, %v; want %+v, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}
