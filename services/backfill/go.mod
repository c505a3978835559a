module github.com/msgexchange/msgexchange/services/backfill

go 1.26.0

require github.com/msgexchange/msgexchange/pkg v0.0.0

require (
	go.uber.org/goleak v1.3.0
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/msgexchange/msgexchange/pkg => ../../pkg
