module github.com/msgexchange/msgexchange/services/dispatcher

go 1.26

require github.com/msgexchange/msgexchange/pkg v0.0.0

replace github.com/msgexchange/msgexchange/pkg => ../../pkg
