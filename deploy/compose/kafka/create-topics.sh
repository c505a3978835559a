#!/usr/bin/env bash
# docker-compose only: the kafka-init one-shot service runs this against the broker once it is
# healthy. The broker has auto.create.topics.enable=false, as production clusters usually do, so
# the topics the dispatcher produces to must exist first. --if-not-exists makes reruns harmless.
#
# The schedule topic (MSGX_TOPIC_SCHD, default msgx.flight.schd) holds the latest state per FLID
# and is compacted: a TOMBSTONE (null value) deletes its FLID. Every other topic keeps the
# default delete policy. Replication factor 1 fits the single compose broker only; production
# uses >= 3 with min.insync.replicas >= 2 (docs/dispatcher.md, "Kafka prerequisites"). Never add
# partitions later: the FLID -> partition mapping would change and break per-FLID order.
set -euo pipefail

bootstrap=${KAFKA_BOOTSTRAP:-kafka:9092}
partitions=${MSGX_TOPIC_PARTITIONS:-3}
replication=${MSGX_TOPIC_REPLICATION:-1}
schd=${MSGX_TOPIC_SCHD:-msgx.flight.schd}
read -r -a topics <<<"${MSGX_TOPICS:?MSGX_TOPICS must list the topics}"

for topic in "${topics[@]}"; do
	policy=delete
	if [[ $topic == "$schd" ]]; then
		policy=compact
	fi
	/opt/kafka/bin/kafka-topics.sh --bootstrap-server "$bootstrap" --create --if-not-exists \
		--topic "$topic" --partitions "$partitions" --replication-factor "$replication" \
		--config cleanup.policy="$policy"
	# A topic created earlier without the policy gets it now.
	/opt/kafka/bin/kafka-configs.sh --bootstrap-server "$bootstrap" --alter --entity-type topics \
		--entity-name "$topic" --add-config cleanup.policy="$policy"
	/opt/kafka/bin/kafka-topics.sh --bootstrap-server "$bootstrap" --describe --topic "$topic"
done
