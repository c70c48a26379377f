"""Kafka error codes and the exceptions that carry them.

Every failure a handler can report is a `KafkaError` whose `code` is the wire value;
handlers catch it and put the code in the response's error field.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError"]


class KafkaError(Exception):
    """An error with a Kafka error code; the message is for logs and error_message fields."""

    code: ErrorCode = ErrorCode.unknown_server_error

    def __init__(self, message: str = "", code: ErrorCode | None = None) -> None:
        super().__init__(message or (code or self.code).name)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self)



class CorruptMessage(KafkaError):
    code = ErrorCode.corrupt_message


class InvalidRecord(KafkaError):
    code = ErrorCode.invalid_record


class MessageTooLarge(KafkaError):
    code = ErrorCode.message_too_large


class RecordListTooLarge(KafkaError):
    code = ErrorCode.record_list_too_large


class UnknownTopicOrPartition(KafkaError):
    code = ErrorCode.unknown_topic_or_partition


class UnknownTopicId(KafkaError):
    code = ErrorCode.unknown_topic_id


class OffsetOutOfRange(KafkaError):
    code = ErrorCode.offset_out_of_range


class InvalidTopic(KafkaError):
    code = ErrorCode.invalid_topic_exception


class TopicAlreadyExists(KafkaError):
    code = ErrorCode.topic_already_exists


class InvalidPartitions(KafkaError):
    code = ErrorCode.invalid_partitions


class InvalidReplicationFactor(KafkaError):
    code = ErrorCode.invalid_replication_factor


class InvalidReplicaAssignment(KafkaError):
    code = ErrorCode.invalid_replica_assignment


class InvalidConfig(KafkaError):
    code = ErrorCode.invalid_config


class InvalidRequest(KafkaError):
    code = ErrorCode.invalid_request


class InvalidTimestamp(KafkaError):
    code = ErrorCode.invalid_timestamp


class InvalidRequiredAcks(KafkaError):
    code = ErrorCode.invalid_required_acks


class UnsupportedVersion(KafkaError):
    code = ErrorCode.unsupported_version


class UnsupportedCompressionType(KafkaError):
    code = ErrorCode.unsupported_compression_type


class OutOfOrderSequence(KafkaError):
    code = ErrorCode.out_of_order_sequence_number


class DuplicateSequence(KafkaError):
    code = ErrorCode.duplicate_sequence_number


class InvalidProducerEpoch(KafkaError):
    code = ErrorCode.invalid_producer_epoch


class ProducerFenced(KafkaError):
    code = ErrorCode.producer_fenced


class UnknownProducerId(KafkaError):
    code = ErrorCode.unknown_producer_id


class InvalidTxnState(KafkaError):
    code = ErrorCode.invalid_txn_state


class KafkaStorageError(KafkaError):
    code = ErrorCode.kafka_storage_error


class TopicDeletionDisabled(KafkaError):
    code = ErrorCode.topic_deletion_disabled


class PolicyViolation(KafkaError):
    code = ErrorCode.policy_violation


class NotLeaderOrFollower(KafkaError):
    code = ErrorCode.not_leader_or_follower


class FencedLeaderEpoch(KafkaError):
    code = ErrorCode.fenced_leader_epoch


class UnknownLeaderEpoch(KafkaError):
    code = ErrorCode.unknown_leader_epoch


class RequestTimedOut(KafkaError):
    code = ErrorCode.request_timed_out


class LogDirNotFound(KafkaError):
    code = ErrorCode.log_dir_not_found


class NotEnoughReplicas(KafkaError):
    code = ErrorCode.not_enough_replicas


class NotEnoughReplicasAfterAppend(KafkaError):
    code = ErrorCode.not_enough_replicas_after_append


class RecordValidation(KafkaError):
    """Kafka's RecordValidationException: records of a batch are invalid. The partition
    answers `code` with `record_errors`, (index of the record in its batch, message)
    for each bad record, and this exception's message as its error_message (Produce v8+,
    KIP-467), so a client fails only those records."""

    def __init__(self, message: str, code: ErrorCode,
                 record_errors: tuple[tuple[int, str], ...]) -> None:
        super().__init__(message, code)
        self.record_errors = record_errors
