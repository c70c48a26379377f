"""What EndTxn at transaction version 2 (KIP-890 part 2) does to an id: Kafka's table.

At version 2 every EndTxn bumps the epoch, so a retry of an EndTxn whose answer was
lost arrives with the epoch before the bump, and the same epoch as the id's means the
*next* transaction's end. Kafka's TransactionCoordinator decides (PF producer fenced,
ITS invalid txn state, NONE no error and no bump, EB no error with a bump):

                      Abort            Commit
                   retry  current   retry  current
    Empty           PF     EB        PF     ITS
    CompleteAbort   NONE   EB        ITS    ITS
    CompleteCommit  ITS    EB        NONE   ITS

"retry" is the epoch one below the id's (or the last epoch of the previous producer id
when the epoch overflowed into a new id). Ongoing ends with a bump; Prepare* answers
CONCURRENT_TRANSACTIONS to a retry of the same outcome. A pure function of the id's
state, so the coordinator does only the I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.coordinator.txn.metadata import MAX_EPOCH, TransactionMetadata, TxnState
from odradek.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class Answer:
    """Answer at once: no change. With NONE, the id's current producer id and epoch."""

    code: ErrorCode


@dataclass(frozen=True, slots=True)
class Prepare:
    """Write PrepareCommit / PrepareAbort with the bumped epoch."""

    commit: bool


def decide(md: TransactionMetadata, producer_id: int, epoch: int, commit: bool,
           from_client: bool) -> Answer | Prepare:
    fencing = md.pending == TxnState.PREPARE_EPOCH_FENCE
    retry_on_overflow = (not fencing and md.last_producer_id == producer_id
                         and epoch == MAX_EPOCH - 1 and md.producer_epoch == 0)
    retry_on_bump = not fencing and md.producer_epoch == epoch + 1
    state = md.state
    if fencing:
        # the coordinator's own abort carries the fencing epoch, above the id's
        valid = (not from_client or epoch == md.producer_epoch) and epoch >= md.producer_epoch
    elif state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        valid = retry_on_bump
    elif state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        valid = retry_on_bump or retry_on_overflow or epoch == md.producer_epoch
    else:
        valid = epoch == md.producer_epoch
    retry = retry_on_bump or retry_on_overflow
    if md.producer_id != producer_id and not retry_on_overflow:
        return Answer(ErrorCode.invalid_producer_id_mapping)
    if md.pending_transition and not fencing:
        return Answer(ErrorCode.concurrent_transactions)
    if not valid:
        return Answer(ErrorCode.producer_fenced)
    if state == TxnState.ONGOING:
        return Prepare(commit)
    if state == TxnState.COMPLETE_COMMIT:
        if commit:
            return Answer(ErrorCode.none if retry else ErrorCode.invalid_txn_state)
        return Answer(ErrorCode.invalid_txn_state) if retry else Prepare(False)
    if state == TxnState.COMPLETE_ABORT:
        if commit:
            return Answer(ErrorCode.invalid_txn_state)
        return Answer(ErrorCode.none) if retry else Prepare(False)
    if state == TxnState.PREPARE_COMMIT:
        return Answer(ErrorCode.concurrent_transactions if commit
                      else ErrorCode.invalid_txn_state)
    if state == TxnState.PREPARE_ABORT:
        return Answer(ErrorCode.invalid_txn_state if commit
                      else ErrorCode.concurrent_transactions)
    if state == TxnState.EMPTY:
        return Answer(ErrorCode.invalid_txn_state) if commit else Prepare(False)
    return Answer(ErrorCode.concurrent_transactions)  # Dead: being expired
