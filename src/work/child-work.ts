import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { Bus } from '../bus/index.js';
import type { Ledger } from '../ledger/index.js';
import { formatLedgerEntries } from '../ledger/index.js';
import { SpanAttributes, withSpan } from '../telemetry/index.js';
import { defineTool, type ToolContext, type ToolDefinition } from '../tools/index.js';
import { ErrorCodes, UserInputError } from '../util/index.js';
import type { WorkQueue } from './queue.js';
import { isTerminalWorkState, WorkErrorCodes } from './states.js';
import type { WorkItem } from './types.js';

/** What child work reads of the ledger: a work item's entries. */
export type ChildWorkLedgerReader = Pick<Ledger, 'read'>;

export interface CreateChildWorkToolsOptions {
  queue: WorkQueue;
  bus: Bus;
  /** Supplies each child's ledger to `await_child_work` and `check_child_work`. */
  ledger?: ChildWorkLedgerReader;
  /** Kind of a child spawned by agent name only. */
  defaultKind?: string;
  /** Longest wait `await_child_work` accepts. */
  maxAwaitSeconds?: number;
  /** Ledger entries shown per running child in `check_child_work`. */
  checkLedgerEntries?: number;
}

const idsSchema = z.array(z.string().min(1)).min(1).max(50);

// Both agent and kind may be left out, as the descriptions say: the child then goes to the parent's agent
// as the default kind.
const spawnInput = z.object({
  agent: z.string().min(1).max(128).optional().describe('Agent that should do the work (defaults to yours)'),
  kind: z.string().min(1).max(64).optional().describe('Kind of work (defaults to "task")'),
  title: z.string().min(1).max(200).optional(),
  description: z.string().min(1).max(20_000).describe('What the child must do, self-contained'),
  params: z.record(z.string(), z.unknown()).optional(),
  priority: z
    .number()
    .int()
    .min(-1000)
    .max(1000)
    .optional()
    .describe("Defaults to this work item's priority"),
});

const awaitInput = z.object({
  ids: idsSchema.describe('Child work item ids returned by spawn_child_work'),
  timeoutSeconds: z.number().positive().default(300),
});

const checkInput = z.object({ ids: idsSchema });

const terminalEventTypes = ['work:completed', 'work:failed', 'work:dead', 'work:cancelled'] as const;

function requireWorkItem(context: ToolContext): string {
  if (!context.workItemId) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: 'child work can only be used while running a work item.',
    });
  }
  return context.workItemId;
}

/** Children of `parentId` among `ids`; anything else is refused so a run cannot wait on unrelated work. */
async function loadChildren(
  queue: WorkQueue,
  parentId: string,
  ids: ReadonlyArray<string>,
): Promise<WorkItem[]> {
  const unique = [...new Set(ids)];
  const items = await queue.getMany(unique);
  const found = new Map(items.map((item) => [item.id, item]));
  const strangers = unique.filter((id) => found.get(id)?.parentId !== parentId);
  if (strangers.length > 0) {
    throw new UserInputError({
      code: ErrorCodes.notFound,
      message: `not child work of this item: ${strangers.join(', ')}. Use the ids spawn_child_work returned.`,
    });
  }
  return unique.map((id) => found.get(id)!);
}

/** The fingerprint that makes re-spawning the same child after a restart return the existing one. */
function childFingerprint(parentId: string, input: z.output<typeof spawnInput>, kind: string): string {
  const digest = createHash('sha256')
    .update(JSON.stringify([kind, input.agent ?? null, input.description, input.params ?? {}]))
    .digest('hex')
    .slice(0, 24);
  return `child:${parentId}:${digest}`;
}

/**
 * The three child-work tools: `spawn_child_work` (returns at once), `await_child_work`
 * (wakes on completion events, never polls), `check_child_work` (never blocks).
 */
export function createChildWorkTools(options: CreateChildWorkToolsOptions): ToolDefinition[] {
  const { queue, bus, ledger } = options;
  const defaultKind = options.defaultKind ?? 'task';
  const maxAwaitSeconds = options.maxAwaitSeconds ?? 3_600;
  const checkLedgerEntries = options.checkLedgerEntries ?? 5;

  const describeChild = async (child: WorkItem, ledgerEntries?: number) => {
    const entries = ledger ? await ledger.read(child.id, ledgerEntries ? { lastN: ledgerEntries } : {}) : [];
    return {
      id: child.id,
      title: child.title,
      state: child.state,
      ...(isTerminalWorkState(child.state) ? { outcome: child.outcome } : {}),
      ...(ledger ? { ledger: formatLedgerEntries(entries) } : {}),
    };
  };

  const spawn = defineTool({
    name: 'spawn_child_work',
    description:
      'Delegate part of your work as a child work item. Returns its id at once without waiting; use await_child_work ' +
      'or check_child_work for the result. Spawning the same work again returns the existing child.',
    examples: [
      { description: 'Summarise the open issues labelled bug in issues.md.' },
      {
        agent: 'researcher',
        kind: 'task',
        title: 'Survey',
        description: 'List the three most cited papers on X.',
      },
    ],
    input: spawnInput,
    async execute(input, context) {
      const parentId = requireWorkItem(context);
      const parent = await queue.get(parentId);
      if (!parent)
        throw new UserInputError({
          code: ErrorCodes.notFound,
          message: `work item ${parentId} does not exist.`,
        });
      const kind = input.kind ?? defaultKind;
      const fingerprint = childFingerprint(parentId, input, kind);
      const existing = (await queue.list({ parentId, limit: 1_000 })).find(
        (child) => child.dedupKey === fingerprint && child.state !== 'merged',
      );
      if (existing) return JSON.stringify({ id: existing.id, state: existing.state, existing: true });
      // The child runs later in its own trace (a worker claims it); this span names it for correlation.
      const result = await withSpan(
        `submit_work_item ${kind}`,
        {
          attributes: {
            [SpanAttributes.workItemKind]: kind,
            [SpanAttributes.workItemParentId]: parentId,
          },
        },
        async (span) => {
          const submitted = await queue.submit({
            kind,
            agentId: input.agent ?? parent.agentId ?? undefined,
            title: input.title,
            description: input.description,
            params: input.params ?? {},
            ...(input.priority !== undefined ? { priority: input.priority } : {}),
            parentId,
            dedupKey: fingerprint,
            source: 'spawn_child_work',
          });
          span.setAttribute(SpanAttributes.workItemId, submitted.id);
          return submitted;
        },
      );
      return JSON.stringify({ id: result.id, state: 'queued', existing: result.merged });
    },
  });

  const awaitChildren = defineTool({
    name: 'await_child_work',
    description:
      'Wait until the given child work items have all finished (completed, failed, dead or cancelled) and return each ' +
      "one's outcome and ledger. Fails with CHILD_WORK_TIMEOUT after timeoutSeconds (default 300).",
    examples: [{ ids: ['wi_child1'], timeoutSeconds: 120 }],
    input: awaitInput,
    async execute(input, context) {
      const parentId = requireWorkItem(context);
      const timeoutSeconds = Math.min(input.timeoutSeconds, maxAwaitSeconds);
      const ids = [...new Set(input.ids)];
      const pending = new Set(ids);
      let wakeUp: () => void = () => undefined;
      // Set by an event that arrives while the children are being read, when nobody is waiting yet.
      let changedDuringRead = false;
      const changed = () => {
        changedDuringRead = true;
        wakeUp();
      };
      // Subscribe before the first read so an event between the read and the wait is not lost.
      const unsubscribe = bus.subscribe({ types: terminalEventTypes }, (event) => {
        if (pending.has(event.data.workItemId)) changed();
      });
      const parent = await queue.get(parentId);
      const leaseOwner = parent?.state === 'running' ? parent.leaseOwner : null;
      try {
        await loadChildren(queue, parentId, ids);
        // Recorded on the item so that, if this process dies, the parent waits in `blocked` instead of rerunning blind.
        if (leaseOwner) await queue.setWaitingOn(parentId, leaseOwner, ids);
        const deadline = Date.now() + timeoutSeconds * 1_000;
        for (;;) {
          changedDuringRead = false;
          const children = await queue.getMany([...pending]);
          for (const child of children) if (isTerminalWorkState(child.state)) pending.delete(child.id);
          if (pending.size === 0) break;
          // The read may have raced a completion; look again instead of sleeping through it.
          if (changedDuringRead) continue;
          const remainingMs = deadline - Date.now();
          const outcome = await new Promise<'changed' | 'timeout' | 'aborted'>((resolve) => {
            const timer = setTimeout(() => finish('timeout'), Math.max(0, remainingMs));
            const onAbort = () => finish('aborted');
            function finish(reason: 'changed' | 'timeout' | 'aborted') {
              clearTimeout(timer);
              context.signal.removeEventListener('abort', onAbort);
              wakeUp = () => undefined;
              resolve(reason);
            }
            wakeUp = () => finish('changed');
            if (context.signal.aborted) finish('aborted');
            else context.signal.addEventListener('abort', onAbort, { once: true });
          });
          if (outcome === 'aborted') {
            throw new UserInputError({
              code: ErrorCodes.aborted,
              message: 'the run was aborted while awaiting child work.',
            });
          }
          if (outcome === 'timeout') {
            const states = (await queue.getMany([...pending])).map((child) => `${child.id} (${child.state})`);
            throw new UserInputError({
              code: WorkErrorCodes.childWorkTimeout,
              message: `child work did not finish within ${timeoutSeconds} s: ${states.join(', ')}. Call check_child_work to see progress, or await_child_work again.`,
              details: { pending: [...pending] },
            });
          }
        }
        const finished = await queue.getMany(ids);
        return JSON.stringify(
          { children: await Promise.all(finished.map((child) => describeChild(child))) },
          null,
          1,
        );
      } finally {
        unsubscribe();
        if (leaseOwner && !context.signal.aborted) {
          await queue.setWaitingOn(parentId, leaseOwner, null).catch(() => undefined);
        }
      }
    },
  });

  const check = defineTool({
    name: 'check_child_work',
    description:
      'Look at child work items without waiting: their states, the outcome of finished ones and the latest ledger ' +
      'entries of the others.',
    examples: [{ ids: ['wi_child1', 'wi_child2'] }],
    input: checkInput,
    async execute(input, context) {
      const parentId = requireWorkItem(context);
      const children = await loadChildren(queue, parentId, input.ids);
      const described = await Promise.all(
        children.map((child) =>
          describeChild(child, isTerminalWorkState(child.state) ? undefined : checkLedgerEntries),
        ),
      );
      return JSON.stringify({ children: described }, null, 1);
    },
  });

  return [spawn, awaitChildren, check];
}
