module github.com/msgexchange/msgexchange/migrations

go 1.26
