package aodb

import "testing"

// The driver interpolates arguments only where its escaping is safe, and never against a DSN
// that decides it.
func TestInterpolate(t *testing.T) {
	for _, tc := range []struct {
		dsn  string
		want bool
	}{
		{"root@tcp(127.0.0.1:3306)/aodb", true},
		{"root@tcp(127.0.0.1:3306)/aodb?parseTime=true", true},
		{"root@tcp(127.0.0.1:3306)/aodb?charset=utf8mb4,utf8", true},
		{"root@tcp(127.0.0.1:3306)/aodb?collation=utf8mb4_unicode_ci", true},
		{"root@tcp(127.0.0.1:3306)/aodb?charset=gbk", false},
		{"root@tcp(127.0.0.1:3306)/aodb?charset=utf8mb4,gbk", false},
		{"root@tcp(127.0.0.1:3306)/aodb?collation=gbk_chinese_ci", false},
		{"root@tcp(127.0.0.1:3306)/aodb?collation=latin1_swedish_ci", false},
		{"root@tcp(127.0.0.1:3306)/aodb?interpolateParams=false", false},
		{"root@tcp(127.0.0.1:3306)/aodb?interpolateParams=true&charset=utf8mb4", true},
		{"user:p?ss@tcp(127.0.0.1:3306)/aodb", true}, // a '?' in the password, no parameters
	} {
		if got := interpolate(tc.dsn); got != tc.want {
			t.Errorf("interpolate(%q) = %v, want %v", tc.dsn, got, tc.want)
		}
	}
}
