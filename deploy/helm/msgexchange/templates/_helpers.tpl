{{/* Names. */}}
{{- define "msgexchange.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "msgexchange.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The five roles, in start order. */}}
{{- define "msgexchange.roles" -}}
ingest pump dispatcher backfill control
{{- end -}}

{{- define "msgexchange.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "msgexchange.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: msgexchange
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "pump"). */}}
{{- define "msgexchange.selectorLabels" -}}
app.kubernetes.io/name: {{ include "msgexchange.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "msgexchange.componentLabels" -}}
{{ include "msgexchange.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The image of a service: (dict "root" $ "component" "pump"). */}}
{{- define "msgexchange.image" -}}
{{- $img := .root.Values.image -}}
{{- $svc := (get .root.Values.services .component) | default dict -}}
{{- $own := $svc.image | default dict -}}
{{- $registry := $own.registry | default $img.registry -}}
{{- $repository := $own.repository | default $img.repository -}}
{{- $tag := $own.tag | default $img.tag | default .root.Chart.AppVersion -}}
{{- $ref := printf "%s/msgx-%s:%s" $repository .component $tag -}}
{{- if $registry -}}{{- $ref = printf "%s/%s" $registry $ref -}}{{- end -}}
{{- $ref -}}
{{- end -}}

{{- define "msgexchange.connectionsSecret" -}}
{{- .Values.connections.existingSecret | default (printf "%s-connections" (include "msgexchange.fullname" .)) -}}
{{- end -}}

{{/* "true" when the connections Secret holds the sentinels' password (redis-sentinel-password). */}}
{{- define "msgexchange.redisSentinelPassword" -}}
{{- $c := .Values.connections -}}
{{- if or (and $c.existingSecret $c.existingSecretHasRedisSentinelPassword) (and (not $c.existingSecret) $c.redisSentinelPassword) }}true{{ end -}}
{{- end -}}

{{/* "true" when the connections Secret holds the data nodes' password (redis-sentinel-data-password). */}}
{{- define "msgexchange.redisSentinelDataPassword" -}}
{{- $c := .Values.connections -}}
{{- if or (and $c.existingSecret $c.existingSecretHasRedisSentinelDataPassword) (and (not $c.existingSecret) $c.redisSentinelDataPassword) }}true{{ end -}}
{{- end -}}

{{- define "msgexchange.tokensSecret" -}}
{{- .Values.tokens.existingSecret | default (printf "%s-tokens" (include "msgexchange.fullname" .)) -}}
{{- end -}}

{{/*
A parameter value as the services parse it. Helm reads numbers in values as float64, which
would print 33554432 as 3.3554432e+07; whole numbers are printed as integers.
*/}}
{{- define "msgexchange.paramValue" -}}
{{- if kindIs "float64" . -}}
{{- if eq (float64 (int64 .)) . -}}{{ int64 . }}{{- else -}}{{ . }}{{- end -}}
{{- else -}}
{{- . -}}
{{- end -}}
{{- end -}}

{{/*
A duration parameter in seconds, for alert thresholds and the kill grace period. It accepts
what the services accept (pkg/config.ParseDuration): Go durations and a whole number of days.
*/}}
{{- define "msgexchange.seconds" -}}
{{- $s := trim (toString .) -}}
{{- $parts := regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h|d)" $s -1 -}}
{{- if or (not $parts) (ne (join "" $parts) $s) -}}
{{- fail (printf "%q is not a duration (e.g. 90s, 10m, 1h30m, 30d)" $s) -}}
{{- end -}}
{{- $units := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 "d" 86400.0 -}}
{{- $total := 0.0 -}}
{{- range $parts -}}
{{- $unit := regexFind "(ns|us|µs|ms|s|m|h|d)$" . -}}
{{- $total = addf $total (mulf (float64 (trimSuffix $unit .)) (get $units $unit)) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/* The parameter key's environment variable (pkg/config.EnvName). */}}
{{- define "msgexchange.envName" -}}
{{- printf "MSGX_%s" (. | upper | replace "." "_" | replace "-" "_") -}}
{{- end -}}

{{/* PromQL matchers picking this release's series. */}}
{{- define "msgexchange.alertSelector" -}}
{{- if .Values.monitoring.prometheusRule.selector -}}
{{- .Values.monitoring.prometheusRule.selector -}}
{{- else -}}
{{- $roles := include "msgexchange.roles" . | splitList " " -}}
namespace="{{ .Release.Namespace }}",job=~"{{ include "msgexchange.fullname" . }}-({{ join "|" $roles }})"
{{- end -}}
{{- end -}}

{{/* Environment shared by every container: (dict "root" $ "component" "pump"). */}}
{{- define "msgexchange.env" -}}
{{- $root := .root -}}
# The connections are files mounted from their Secret (the connections volume), never values
# in the environment, where /proc/<pid>/environ and `kubectl describe` would show them.
- name: MSGX_PG_DSN_FILE
  value: /etc/msgx/connections/pg-dsn
- name: MSGX_MYSQL_DSN_FILE
  value: /etc/msgx/connections/mysql-dsn
{{- if index $root.Values.config "redis.sentinel-master" }}
{{- if include "msgexchange.redisSentinelPassword" $root }}
- name: MSGX_REDIS_SENTINEL_PASSWORD_FILE
  value: /etc/msgx/connections/redis-sentinel-password
{{- end }}
{{- if include "msgexchange.redisSentinelDataPassword" $root }}
- name: MSGX_REDIS_SENTINEL_DATA_PASSWORD_FILE
  value: /etc/msgx/connections/redis-sentinel-data-password
{{- end }}
{{- else }}
- name: MSGX_REDIS_URL_FILE
  value: /etc/msgx/connections/redis-url
{{- end }}
# The admin endpoints listen on all interfaces of the pod: the kubelet's probes and Prometheus
# reach them on the pod IP, and `kubectl port-forward`, which connects to localhost inside the
# pod, reaches /metrics and /readyz too. Who reaches the port from the network is the
# NetworkPolicy's admin rule (networkPolicy.admin), on by default.
- name: MSGX_ADMIN_ADDR
  value: ":9090"
# The pod name: logs, metrics and the role_holder row name the instance.
- name: MSGX_INSTANCE
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: OTEL_SERVICE_NAME
  value: msgx-{{ .component }}
{{- with $root.Values.tracing.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- range $k, $v := $root.Values.tracing.env }}
- name: {{ $k }}
  value: {{ $v | toString | quote }}
{{- end }}
{{- end -}}

{{/* The checksum of the Secrets the chart renders: a rotated token or DSN restarts the pods. */}}
{{- define "msgexchange.secretsChecksum" -}}
{{- include (print .Template.BasePath "/secrets.yaml") . | sha256sum -}}
{{- end -}}

{{/* "true" when the Prometheus Operator resource of kind (ServiceMonitor, PrometheusRule) is
rendered: its own enabled value, and monitoring.enabled true, or auto where the cluster serves the
kind's CRD. helm template sees no cluster, so auto renders no alert there; monitoring.enabled=true
is the one documented switch for it (docs/operations.md, "Dashboard"). */}}
{{- define "msgexchange.monitoringRenders" -}}
{{- $root := .root -}}
{{- $m := $root.Values.monitoring -}}
{{- $own := ternary $m.serviceMonitor.enabled $m.prometheusRule.enabled (eq .kind "ServiceMonitor") -}}
{{- $switch := toString $m.enabled -}}
{{- if and $own (or (eq $switch "true") (and (eq $switch "auto") ($root.Capabilities.APIVersions.Has (print "monitoring.coreos.com/v1/" .kind)))) -}}
true
{{- end -}}
{{- end -}}

{{/* A service's replicas (services.<name>.replicas, 1 when unset). */}}
{{- define "msgexchange.replicas" -}}
{{- if hasKey . "replicas" -}}{{ .replicas }}{{- else -}}1{{- end -}}
{{- end -}}

{{/* The pods' ServiceAccount name; empty means the namespace's default. */}}
{{- define "msgexchange.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "msgexchange.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* NetworkPolicy peers from (dict "root" $ "from" .Values.networkPolicy.control). */}}
{{- define "msgexchange.peers" -}}
{{- range .from.namespaces }}
- namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {{ . | quote }}
{{- end }}
{{- range .from.pods }}
- podSelector:
    matchLabels:
      {{- toYaml . | nindent 6 }}
{{- end }}
{{- range .from.ipBlocks }}
- ipBlock:
    cidr: {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
What the chart refuses to render, each with what to set instead: the services connecting as
the schema owner (one DSN for them and the migration Job) unless connections.allowOwnerDSN, and
client-certificate subjects without the CA that would verify them.
*/}}
{{- define "msgexchange.validate" -}}
{{- $c := .Values.connections -}}
{{- $fix := "put the schema owner's DSN in connections.migrationPgDSN (key migration-pg-dsn with existingSecret and existingSecretHasMigrationDSN=true) and the DML-only role msgx_app's in pgDSN (docs/security.md, \"Database roles\"), or set connections.allowOwnerDSN=true to accept one DSN for both" -}}
{{- if not $c.allowOwnerDSN -}}
{{- if $c.existingSecret -}}
{{- if not $c.existingSecretHasMigrationDSN -}}
{{- fail (printf "connections.existingSecret without migration-pg-dsn (connections.existingSecretHasMigrationDSN is false): the migration Job and the services would share pg-dsn, so the services would run as the schema owner and could run DDL; %s" $fix) -}}
{{- end -}}
{{- else if not $c.migrationPgDSN -}}
{{- fail (printf "connections.migrationPgDSN is empty: the migration Job and the services would share pgDSN, so the services would run as the schema owner and could run DDL; %s" $fix) -}}
{{- else if eq $c.migrationPgDSN $c.pgDSN -}}
{{- fail (printf "connections.migrationPgDSN equals connections.pgDSN: the services would run as the schema owner and could run DDL; %s" $fix) -}}
{{- end -}}
{{- end -}}
{{- /* values.yaml's example DSNs carry passwords everyone can read: the chart refuses to
put them into the Secret unless allowExamplePasswords says the cluster is a throwaway one. */ -}}
{{- if and (not $c.existingSecret) (not $c.allowExamplePasswords) -}}
{{- range $k := list "pgDSN" "migrationPgDSN" "mysqlDSN" -}}
{{- $dsn := get $c $k | default "" | toString -}}
{{- $example := regexFind "(^|//)(msgx_app:msgx_app|msgx:msgx)@" $dsn | trimPrefix "//" | trimSuffix "@" -}}
{{- if $example -}}
{{- fail (printf "connections.%s holds the example password of values.yaml (%s): set the real DSN, or better create the Secret yourself and name it in connections.existingSecret (docs/operations.md); connections.allowExamplePasswords=true accepts the example (a throwaway cluster)" $k $example) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $cfg := .Values.config -}}
{{- /* One Redis, named one way, as the services' own check (pkg/config) wants it. */ -}}
{{- if get $cfg "redis.sentinel-master" -}}
{{- if and (not $c.existingSecret) $c.redisURL -}}
{{- fail "config.redis.sentinel-master is set and so is connections.redisURL: name one Redis (the services would refuse to start); for Sentinel set connections.redisURL to \"\"" -}}
{{- end -}}
{{- if not (get $cfg "redis.sentinel-addrs") -}}
{{- fail "config.redis.sentinel-master needs config.redis.sentinel-addrs: the sentinels to ask for the master (host:port, comma-separated)" -}}
{{- end -}}
{{- else if or (include "msgexchange.redisSentinelPassword" .) (include "msgexchange.redisSentinelDataPassword" .) (get $cfg "redis.sentinel-addrs") -}}
{{- fail "a Redis Sentinel setting (config.redis.sentinel-addrs or a connections.redisSentinel* password) is set but config.redis.sentinel-master is empty: name the master, or clear it" -}}
{{- end -}}
{{- /* Keys renamed to the one naming rule (docs/environment.md, "Renamed keys"). The services
still read their variables, which did not change, but a values file with the old and the new
key would render one variable twice, so the chart names the new key instead. */ -}}
{{- range $old, $new := dict "kafka-brokers" "kafka.brokers" "redis-prefix" "redis.prefix" "log-level" "log.level" "control-operator-subjects" "control.operator-subjects" "control-reader-subjects" "control.reader-subjects" -}}
{{- if hasKey $cfg $old -}}
{{- fail (printf "config.%s was renamed to config.%s: set that key instead (docs/environment.md, \"Renamed keys\")" $old $new) -}}
{{- end -}}
{{- end -}}
{{- /* The duration parameters' limits (templates/_limits.tpl, generated from pkg/config's
registry), said as the services say them: the schema's pattern only checks "a duration". */ -}}
{{- range $key, $l := include "msgexchange.durationLimits" . | fromYaml -}}
{{- $v := get $cfg $key -}}
{{- if and (not (kindIs "invalid" $v)) (ne (toString $v) "") -}}
{{- $s := 0.0 -}}
{{- if ne (toString $v) "0" -}}{{- $s = include "msgexchange.seconds" $v | float64 -}}{{- end -}}
{{- $low := and $l.min (lt $s (include "msgexchange.seconds" $l.min | float64)) -}}
{{- $high := and $l.max (gt $s (include "msgexchange.seconds" $l.max | float64)) -}}
{{- if or $low $high -}}
{{- fail (printf "config.%s=%v: must be %s (%s%s, docs/environment.md)" $key $v $l.text (ternary (printf "%s; " $l.why) "" (ne $l.why "")) $l.env) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $subjects := list -}}
{{- range $k := list "control.operator-subjects" "control.reader-subjects" -}}
{{- if get $cfg $k -}}
{{- $subjects = append $subjects (printf "config.%s" $k) -}}
{{- end -}}
{{- end -}}
{{- if and $subjects (not .Values.services.control.tls.clientCASecret) -}}
{{- fail (printf "%s name client-certificate subjects, but services.control.tls.clientCASecret is empty: without a client CA no certificate is verified, so no subject could ever match (control would refuse to start); set services.control.tls.clientCASecret (with tls.secretName) or clear the subjects" (join " and " $subjects)) -}}
{{- end -}}
{{- $tls := .Values.services.control.tls -}}
{{- if and $tls.clientCASecret (not $tls.secretName) -}}
{{- fail "services.control.tls.clientCASecret is set but services.control.tls.secretName is empty: control verifies client certificates only on a TLS listener, which needs its own certificate (control would refuse to start); set services.control.tls.secretName or clear clientCASecret" -}}
{{- end -}}
{{- $k := .Values.kafka -}}
{{- if and (not $k.tls.enabled) (not $k.allowPlaintext) -}}
{{- fail "kafka.tls.enabled is false: the dispatcher would send the records, and any credential, to Kafka in the clear; enable TLS (kafka.tls), or set kafka.allowPlaintext=true to accept a plaintext connection (a development cluster)" -}}
{{- end -}}
{{- if and $k.sasl.mechanism (not $k.tls.enabled) -}}
{{- fail "kafka.sasl.mechanism needs kafka.tls.enabled: the password would cross the network in the clear (the dispatcher would refuse to start)" -}}
{{- end -}}
{{- if and $k.sasl.mechanism (not (and $k.sasl.username $k.sasl.passwordSecret)) -}}
{{- fail "kafka.sasl.mechanism needs kafka.sasl.username and kafka.sasl.passwordSecret (a Secret with the key sasl-password)" -}}
{{- end -}}
{{- if and (not $k.sasl.mechanism) (or $k.sasl.username $k.sasl.passwordSecret) -}}
{{- fail "kafka.sasl.username or passwordSecret is set but kafka.sasl.mechanism is empty: name the mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)" -}}
{{- end -}}
{{- if and (not $k.tls.enabled) (or $k.tls.caSecret $k.tls.serverName $k.tls.clientCertSecret) -}}
{{- fail "a kafka.tls setting is set but kafka.tls.enabled is false (the dispatcher would refuse to start): enable TLS or clear it" -}}
{{- end -}}
{{- $t := .Values.tokens -}}
{{- if and $t.readerToken (eq $t.readerToken $t.controlToken) -}}
{{- fail "tokens.readerToken equals tokens.controlToken: a reader would hold the operator role (control would refuse to start); give the reader a token of its own" -}}
{{- end -}}
{{- end -}}
