import { z } from 'zod';
import type { Ledger } from '../ledger/index.js';
import { defineTool, type ToolDefinition } from '../tools/index.js';
import { ErrorCodes, UserInputError } from '../util/index.js';
import type { WorkQueue } from './queue.js';
import type { WorkItem } from './types.js';

/**
 * What blocking writes to the ledger: the reason on block, the answer on unblock. It reads the last note,
 * so that a retry after a refused write does not write it twice.
 */
export type BlockedLedgerWriter = Pick<Ledger, 'append' | 'read'>;

const maxReasonChars = 2_000;

const reportBlockedInput = z.object({
  reason: z.string().trim().min(1).max(maxReasonChars).describe('What stops you, in one or two sentences'),
  needs: z
    .string()
    .trim()
    .min(1)
    .max(maxReasonChars)
    .optional()
    .describe('What would unblock you: information, a decision, access'),
});

/** The state reason of a blocked item: the reason, and what it needs when that was said. */
export function blockedReason(reason: string, needs?: string): string {
  return needs ? `${reason} (needs: ${needs})` : reason;
}

/**
 * The state change and its note are two commits: the queue and the ledger each commit their own write, and
 * these functions are handed those two, not the database that could run both in one transaction. So each
 * writes in the order that a retry can finish when the second write is refused (a full disk), and a retry
 * with the same input finishes it: the note is appended unless it is already the item's last note.
 */
async function appendNoteOnce(ledger: BlockedLedgerWriter, id: string, content: string): Promise<void> {
  const [last] = await ledger.read(id, { entryType: 'note', lastN: 1 });
  if (last?.content !== content) await ledger.append(id, { entryType: 'note', content });
}

async function existing(queue: WorkQueue, id: string): Promise<WorkItem> {
  const item = await queue.get(id);
  if (!item)
    throw new UserInputError({ code: ErrorCodes.notFound, message: `work item ${id} does not exist.` });
  return item;
}

/**
 * Blocks a work item on someone's say-so (the agent's `report_blocked`, the gateway, the CLI): the reason
 * goes to the ledger, so the run that resumes it reads why it stopped. A running item is taken from its
 * worker, whose pool stops the run on `work:blocked`. Blocking an item already blocked for the same reason
 * succeeds: it is the retry of a block whose note was refused, and writes that note.
 */
export async function blockWorkItem(
  queue: WorkQueue,
  ledger: BlockedLedgerWriter | undefined,
  id: string,
  input: { reason: string; needs?: string },
): Promise<WorkItem> {
  const item = await existing(queue, id);
  const reason = blockedReason(input.reason, input.needs);
  const note = `Blocked: ${reason}`;
  if (item.state === 'blocked' && item.stateReason === reason) {
    if (ledger) await appendNoteOnce(ledger, id, note);
    return item;
  }
  const leased = item.state === 'running' || item.state === 'claimed';
  if (!leased && item.state !== 'queued') {
    throw new UserInputError({
      code: ErrorCodes.conflict,
      message: `work item ${id} is ${item.state}; only queued or running work can be blocked.`,
    });
  }
  // The state first: it carries the reason, by which a retry knows the block was done.
  const blocked = await queue.block(id, {
    reason,
    ...(leased && item.leaseOwner ? { workerId: item.leaseOwner } : {}),
  });
  await ledger?.append(id, { entryType: 'note', content: note });
  return blocked;
}

/** Puts a blocked item back in the queue; the answer, when given, is what its next run reads first. */
export async function unblockWorkItem(
  queue: WorkQueue,
  ledger: BlockedLedgerWriter | undefined,
  id: string,
  input: { note?: string } = {},
): Promise<WorkItem> {
  const item = await existing(queue, id);
  if (item.state !== 'blocked') {
    throw new UserInputError({
      code: ErrorCodes.conflict,
      message: `work item ${id} is ${item.state}, not blocked.`,
    });
  }
  // The note first: once queued, the item may be claimed at once, and its run must find the answer.
  if (input.note && ledger) await appendNoteOnce(ledger, id, `Unblocked: ${input.note}`);
  return queue.unblock(id);
}

/**
 * `report_blocked {reason, needs?}`: the agent says it cannot go on. Its work item leaves the worker and
 * waits in `blocked` (shown by `work list`, the awareness digest and the heartbeat's `agent.blocked`)
 * until someone unblocks it; the next run reads the reason and the answer from the ledger.
 */
export function createReportBlockedTool(options: {
  queue: WorkQueue;
  ledger?: BlockedLedgerWriter;
}): ToolDefinition {
  return defineTool({
    name: 'report_blocked',
    description:
      'Say that you cannot continue this work item without something you do not have (information, a decision, ' +
      'access). The item stops and waits as blocked until a person or another agent unblocks it; your next run ' +
      'then starts with the answer. Do not use it for problems you can solve yourself.',
    examples: [
      { reason: 'The deploy script needs a production token.', needs: 'a token with deploy scope' },
      { reason: 'The spec leaves the retention period open.' },
    ],
    input: reportBlockedInput,
    async execute(input, context) {
      if (!context.workItemId) {
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message: 'report_blocked can only be used while running a work item.',
        });
      }
      const item = await options.queue.get(context.workItemId);
      if (!item || (item.state !== 'running' && item.state !== 'claimed') || !item.leaseOwner) {
        throw new UserInputError({
          code: ErrorCodes.invalidRequest,
          message: 'report_blocked needs a work item that a worker is running; this run has none.',
        });
      }
      const blocked = await blockWorkItem(options.queue, options.ledger, item.id, input);
      return {
        content: `Work item ${blocked.id} is blocked: ${blocked.stateReason}. Stop here; it resumes when unblocked.`,
        metadata: { blockedWorkItemId: blocked.id },
      };
    },
  });
}
