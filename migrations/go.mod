module github.com/msgexchange/msgexchange/migrations

go 1.26

require go.uber.org/goleak v1.3.0
