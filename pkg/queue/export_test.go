package queue

// ListQuery exposes the statement List runs, for the tests that EXPLAIN it.
var ListQuery = listQuery
