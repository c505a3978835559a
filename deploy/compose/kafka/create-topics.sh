#!/usr/bin/env bash
# docker-compose only: the kafka-init one-shot service runs this against the broker once it is
# healthy. The broker has auto.create.topics.enable=false, as production clusters usually do, so
# the topics the dispatcher produces to must exist first. --if-not-exists makes reruns harmless.
set -euo pipefail

bootstrap=${KAFKA_BOOTSTRAP:-kafka:9092}
partitions=${MSGX_TOPIC_PARTITIONS:-3}
read -r -a topics <<<"${MSGX_TOPICS:?MSGX_TOPICS must list the topics}"

for topic in "${topics[@]}"; do
	/opt/kafka/bin/kafka-topics.sh --bootstrap-server "$bootstrap" --create --if-not-exists \
		--topic "$topic" --partitions "$partitions" --replication-factor 1
	/opt/kafka/bin/kafka-topics.sh --bootstrap-server "$bootstrap" --describe --topic "$topic"
done
