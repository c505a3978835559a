{{- /* Generated from pkg/config's registry by `go test ./tools/chartcheck -run TestValuesSchemaMatchesConfig -update`:
the duration parameters' limits, which msgexchange.validate checks (the schema says only "a duration"). */ -}}
{{- define "msgexchange.durationLimits" -}}
"shutdown-timeout": {"env":"MSGX_SHUTDOWN_TIMEOUT","max":"","min":"1ns","text":"positive","why":""}
"inbox.timeout": {"env":"MSGX_INBOX_TIMEOUT","max":"8s","min":"1ns","text":"positive, at most 8s","why":"longer calls would outlive the leader lease of the lock connection"}
"redis.timeout": {"env":"MSGX_REDIS_TIMEOUT","max":"8s","min":"1ns","text":"positive, at most 8s","why":"longer calls would outlive the leader lease of the lock connection"}
"kafka.send-timeout": {"env":"MSGX_KAFKA_SEND_TIMEOUT","max":"","min":"1ns","text":"positive","why":""}
"control.call-timeout": {"env":"MSGX_CONTROL_CALL_TIMEOUT","max":"","min":"1ns","text":"positive","why":""}
"control.read-timeout": {"env":"MSGX_CONTROL_READ_TIMEOUT","max":"","min":"1ns","text":"positive","why":""}
"control.pool-wait": {"env":"MSGX_CONTROL_POOL_WAIT","max":"","min":"1ns","text":"positive","why":""}
"control.max-connection-age": {"env":"MSGX_CONTROL_MAX_CONNECTION_AGE","max":"","min":"1ns","text":"positive","why":""}
"control.max-connection-age-grace": {"env":"MSGX_CONTROL_MAX_CONNECTION_AGE_GRACE","max":"","min":"1ns","text":"positive","why":""}
"control.send-stall-timeout": {"env":"MSGX_CONTROL_SEND_STALL_TIMEOUT","max":"","min":"1ns","text":"positive","why":""}
"pipeline.poll-interval": {"env":"MSGX_PIPELINE_POLL_INTERVAL","max":"","min":"50ms","text":"at least 50ms","why":""}
"pipeline.busy-poll-interval": {"env":"MSGX_PIPELINE_BUSY_POLL_INTERVAL","max":"","min":"50ms","text":"at least 50ms","why":""}
"pipeline.max-commit-delay": {"env":"MSGX_PIPELINE_MAX_COMMIT_DELAY","max":"","min":"1ns","text":"positive","why":""}
"pipeline.late-detect-period": {"env":"MSGX_PIPELINE_LATE_DETECT_PERIOD","max":"","min":"1ns","text":"positive","why":""}
"pipeline.backoff-cap": {"env":"MSGX_PIPELINE_BACKOFF_CAP","max":"","min":"1ns","text":"positive","why":""}
"pipeline.backfill-period": {"env":"MSGX_PIPELINE_BACKFILL_PERIOD","max":"","min":"1ns","text":"positive","why":""}
"pipeline.backfill-backoff": {"env":"MSGX_PIPELINE_BACKFILL_BACKOFF","max":"","min":"1ns","text":"positive","why":""}
"pipeline.backfill-backoff-cap": {"env":"MSGX_PIPELINE_BACKFILL_BACKOFF_CAP","max":"","min":"1ns","text":"positive","why":""}
"pipeline.overdue-backfill": {"env":"MSGX_PIPELINE_OVERDUE_BACKFILL","max":"","min":"1ns","text":"positive","why":""}
"pipeline.head-age-alert": {"env":"MSGX_PIPELINE_HEAD_AGE_ALERT","max":"","min":"1ns","text":"positive","why":""}
"pipeline.event-retention": {"env":"MSGX_PIPELINE_EVENT_RETENTION","max":"","min":"1ns","text":"positive","why":""}
"pipeline.proc-retention": {"env":"MSGX_PIPELINE_PROC_RETENTION","max":"7d","min":"1d","text":"between 1d and 7d","why":"R-RETAIN-1"}
"pipeline.req-retention": {"env":"MSGX_PIPELINE_REQ_RETENTION","max":"","min":"1ns","text":"positive","why":""}
"pipeline.step-timeout": {"env":"MSGX_PIPELINE_STEP_TIMEOUT","max":"","min":"1ns","text":"positive","why":""}
"pipeline.record-timeout": {"env":"MSGX_PIPELINE_RECORD_TIMEOUT","max":"","min":"1ns","text":"positive","why":""}
"pipeline.backlog-interval": {"env":"MSGX_PIPELINE_BACKLOG_INTERVAL","max":"","min":"1ns","text":"positive","why":""}
"schd.flush-period": {"env":"MSGX_SCHD_FLUSH_PERIOD","max":"","min":"1ns","text":"positive","why":""}
"schd.snap-log-retention": {"env":"MSGX_SCHD_SNAP_LOG_RETENTION","max":"","min":"1ns","text":"positive","why":""}
"flight.history-retention": {"env":"MSGX_FLIGHT_HISTORY_RETENTION","max":"","min":"1ns","text":"positive","why":""}
"flight.quiet-period": {"env":"MSGX_FLIGHT_QUIET_PERIOD","max":"","min":"1ns","text":"positive","why":""}
"retention.pause": {"env":"MSGX_RETENTION_PAUSE","max":"10s","min":"0s","text":"between 0s and 10s","why":""}
"retention.jobs": {"env":"MSGX_RETENTION_JOBS","max":"","min":"1ns","text":"positive","why":""}
"consistency-check.period": {"env":"MSGX_CONSISTENCY_CHECK_PERIOD","max":"","min":"1ns","text":"positive","why":""}
"airport.operation-day-cutover": {"env":"MSGX_AIRPORT_OPERATION_DAY_CUTOVER","max":"23h59m59.999999999s","min":"0s","text":"between 0s and 23h59m59.999999999s","why":"within a day"}
"req.timeout": {"env":"MSGX_REQ_TIMEOUT","max":"","min":"1ns","text":"positive","why":""}
"dispatcher.read-timeout": {"env":"MSGX_DISPATCHER_READ_TIMEOUT","max":"","min":"1ns","text":"positive","why":""}
"dispatcher.stats-period": {"env":"MSGX_DISPATCHER_STATS_PERIOD","max":"","min":"1ns","text":"positive","why":""}
{{- end -}}
