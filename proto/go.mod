module github.com/msgexchange/msgexchange/proto

go 1.26
