package outbox

// MarkSentSQL lets the plan test explain MarkSent's statement.
const MarkSentSQL = markSentSQL
