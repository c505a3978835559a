package kafkarecord

import "github.com/twmb/franz-go/pkg/kmsg"

// The isolation levels of a ListOffsets request: the end of a partition as a read_committed
// consumer sees it (the last stable offset) or as any other does (the high watermark).
const (
	ReadUncommitted int8 = 0
	ReadCommitted   int8 = 1
)

// ListOffsetsRequest asks for the end of every partition of the topics a metadata request
// returned, at the isolation level given. The floor needs the last stable offset to know where
// a read_committed read of a topic ends; the chaos harness both ends to name an open
// transaction. A topic whose metadata carries an error is the caller's to refuse first.
func ListOffsetsRequest(topics []kmsg.MetadataResponseTopic, isolation int8) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	for _, mt := range topics {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = *mt.Topic
		for _, mp := range mt.Partitions {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = mp.Partition
			rp.Timestamp = -1 // the latest offset
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}
