import { type Command, Option } from 'commander';
import type { Ledger, LedgerEntry, LedgerEntryType } from '../../ledger/index.js';
import { AgentdError, clipText, ErrorCodes, parseUntrustedJson, UserInputError } from '../../util/index.js';
import type { WorkClass, WorkItem, WorkQueue, WorkState } from '../../work/index.js';
import type { GatewayClient } from '../gateway-client.js';
import { fillHelpWhenAsked, loadLedger, loadWork } from '../lazy-modules.js';
import { type CliIo, printJson, processIo, reportError, terminalOf } from '../output.js';
import { connectFromOptions, type RemoteOptions, tokenOption, urlOption } from '../remote.js';
import { paintState } from '../terminal.js';

export interface WorkCommandDeps {
  /** Opens the work queue and ledger on the configured database; `close` releases them. */
  openWork(): Promise<{ queue: WorkQueue; ledger: Pick<Ledger, 'read' | 'append'>; close(): Promise<void> }>;
  io?: CliIo;
  setExitCode(code: number): void;
}

interface JsonOption {
  json?: boolean;
}

/** `--url`/`--token` (or $AGENTD_URL): the command asks a running server instead of the database. */
type ReadOptions = JsonOption & RemoteOptions;

interface WorkListFilter {
  states?: WorkState[];
  kind?: string;
  agentId?: string;
  sessionKey?: string;
  parentId?: string;
  workClass: WorkClass;
  limit: number;
  /** Oldest first (children in the order they were made); newest first otherwise. */
  oldestFirst?: boolean;
}

/** What `work list|show` and `ledger show` read, from the database or from a server's work.* methods. */
interface WorkReader {
  get(id: string): Promise<WorkItem | undefined>;
  list(filter: WorkListFilter): Promise<WorkItem[]>;
  ledger(id: string): Promise<LedgerEntry[]>;
  close(): Promise<void>;
}

type WorkModule = Awaited<ReturnType<typeof loadWork>>;

function localReader(
  work: Awaited<ReturnType<WorkCommandDeps['openWork']>>,
  { workClassFilter }: WorkModule,
): WorkReader {
  const { queue, ledger } = work;
  return {
    get: (id) => queue.get(id),
    list: ({ states, workClass, kind, oldestFirst, ...filter }) =>
      queue.list({
        ...filter,
        ...(oldestFirst ? { order: 'oldest' as const } : {}),
        ...(states ? { states } : {}),
        // An explicit kind shows that kind even when it is system work.
        ...(kind ? { kind } : workClassFilter(workClass, queue.config.systemKinds)),
      }),
    ledger: (id) => ledger.read(id),
    close: () => work.close(),
  };
}

async function remoteReader(options: RemoteOptions): Promise<WorkReader> {
  const client = await connectFromOptions(options);
  return {
    async get(id) {
      try {
        return (await client.call<{ item: WorkItem }>('work.get', { id })).item;
      } catch (error) {
        if (AgentdError.isInstance(error) && error.code === ErrorCodes.notFound) return undefined;
        throw error;
      }
    },
    async list({ states, workClass, oldestFirst, ...filter }) {
      const { items } = await client.call<{ items: WorkItem[] }>('work.list', {
        ...filter,
        ...(states ? { state: states.join(',') } : {}),
        class: workClass,
      });
      return oldestFirst ? [...items].reverse() : items;
    },
    ledger: async (id) => (await client.call<{ ledger: LedgerEntry[] }>('work.get', { id })).ledger,
    close: () => client.close(),
  };
}

/** `--params`: a JSON object. zod is loaded for it here, so the other work commands start without it. */
async function parseParams(text: string): Promise<Record<string, unknown>> {
  const { z } = await import('zod');
  return parseUntrustedJson(text, z.record(z.string(), z.unknown()), {
    maxBytes: 64 * 1024,
    what: '--params',
  });
}

/** What `work submit` prints: the queue's answer, from the database or from `work.submit`. */
interface SubmitAnswer {
  id: string;
  merged?: boolean;
  mergedRecordId?: string;
  duplicate?: boolean;
}

function ago(ms: number): string {
  if (ms < 60_000) return `${Math.round(ms / 1000)}s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)}m`;
  if (ms < 86_400_000) return `${Math.round(ms / 3_600_000)}h`;
  return `${Math.round(ms / 86_400_000)}d`;
}

function pad(text: string, width: number): string {
  return clipText(text, width).padEnd(width);
}

function itemLine(item: WorkItem, now: number, color: boolean): string {
  // A blocked item's reason is what someone has to act on, so the list shows it.
  const title =
    item.state === 'blocked' && item.stateReason
      ? `${item.title} — blocked: ${item.stateReason}`
      : item.title;
  return [
    pad(item.id, 32),
    // Padded before painting: the escape codes take no columns.
    paintState(color, item.state, pad(item.state, 10)),
    pad(item.kind, 14),
    pad(item.agentId ?? '-', 12),
    pad(`${item.attempts}/${item.maxAttempts}`, 6),
    pad(ago(now - item.updatedAt), 6),
    title,
  ].join(' ');
}

function describeItem(item: WorkItem, color: boolean, { outcomeSummary }: WorkModule): string {
  const lines = [
    `${item.id}  ${paintState(color, item.state)}${item.speculative ? ' (speculative)' : ''}`,
    `  kind:      ${item.kind}${item.agentId ? `  agent: ${item.agentId}` : ''}  priority: ${item.priority}`,
    `  title:     ${item.title}`,
  ];
  if (item.description && item.description !== item.title) lines.push(`  task:      ${item.description}`);
  if (item.parentId) lines.push(`  parent:    ${item.parentId} (depth ${item.depth})`);
  if (item.sessionKey) lines.push(`  session:   ${item.sessionKey}`);
  if (item.dedupKey) lines.push(`  dedup key: ${item.dedupKey}`);
  if (item.mergedInto) lines.push(`  merged into: ${item.mergedInto}`);
  lines.push(`  attempts:  ${item.attempts}/${item.maxAttempts}`);
  if (item.leaseOwner)
    lines.push(`  lease:     ${item.leaseOwner} until ${new Date(item.leaseExpiresAt ?? 0).toISOString()}`);
  if (item.stateReason) lines.push(`  reason:    ${item.stateReason}`);
  if (item.rationale) lines.push(`  rationale: ${item.rationale}`);
  if (item.waitingOn) lines.push(`  waiting on: ${item.waitingOn.join(', ')}`);
  const summary = outcomeSummary(item);
  if (summary) lines.push(`  summary:   ${summary}`);
  if (item.outcome?.error)
    lines.push(`  error:     ${item.outcome.error.code}: ${item.outcome.error.message}`);
  if (item.outcome?.durationMs !== undefined) lines.push(`  duration:  ${item.outcome.durationMs} ms`);
  lines.push(`  created:   ${new Date(item.createdAt).toISOString()}`);
  if (item.resolvedAt) lines.push(`  resolved:  ${new Date(item.resolvedAt).toISOString()}`);
  return lines.join('\n');
}

function parseStates(value: string, { workStates }: WorkModule): WorkState[] {
  const states = value.split(',').map((state) => state.trim());
  const unknown = states.filter((state) => !(workStates as ReadonlyArray<string>).includes(state));
  if (unknown.length > 0) {
    throw new UserInputError({
      code: ErrorCodes.invalidRequest,
      message: `unknown state ${unknown.join(', ')}; states are ${workStates.join(', ')}.`,
    });
  }
  return states as WorkState[];
}

function parseInteger(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const parsed = Number(value);
  if (!Number.isInteger(parsed))
    throw new UserInputError({ code: ErrorCodes.invalidRequest, message: `${name} must be an integer.` });
  return parsed;
}

/** `agentd work submit|list|show|cancel` and `agentd ledger show <id>`; `--json` everywhere. */
export function registerWorkCommands(program: Command, deps: WorkCommandDeps): void {
  const io = deps.io ?? processIo;

  const run = async (
    json: boolean | undefined,
    action: (work: Awaited<ReturnType<WorkCommandDeps['openWork']>>) => Promise<void>,
  ) => {
    let work: Awaited<ReturnType<WorkCommandDeps['openWork']>> | undefined;
    try {
      work = await deps.openWork();
      await action(work);
    } catch (error) {
      deps.setExitCode(reportError(io, error, json === true));
    } finally {
      await work?.close();
    }
  };

  /**
   * A command that changes work: in-process on the database, or with `--url` through the server's work.*
   * method (so the server's pool, not a second process, cancels a running item).
   */
  const change = async (
    options: ReadOptions,
    local: (work: Awaited<ReturnType<WorkCommandDeps['openWork']>>) => Promise<void>,
    remote: (client: GatewayClient) => Promise<void>,
  ) => {
    if (!options.url) return run(options.json, local);
    let client: GatewayClient | undefined;
    try {
      client = await connectFromOptions(options);
      await remote(client);
    } catch (error) {
      deps.setExitCode(reportError(io, error, options.json === true));
    } finally {
      await client?.close();
    }
  };

  const read = async (options: ReadOptions, action: (reader: WorkReader) => Promise<void>) => {
    let reader: WorkReader | undefined;
    try {
      reader = options.url
        ? await remoteReader(options)
        : localReader(await deps.openWork(), await loadWork());
      await action(reader);
    } catch (error) {
      deps.setExitCode(reportError(io, error, options.json === true));
    } finally {
      await reader?.close();
    }
  };

  const statesOption = new Option('--state <states>', 'comma-separated work states');
  const work = program
    .command('work')
    .description('durable work items: submit, list, show, cancel, block, unblock');
  fillHelpWhenAsked(program, work, async () => {
    statesOption.description = `comma-separated: ${(await loadWork()).workStates.join(', ')}`;
  });

  work
    .command('submit')
    .description('submit a work item')
    .argument('<kind>', 'kind of work, e.g. task')
    .argument('[description...]', 'what to do')
    .option('--title <title>', 'short title')
    .option('--agent <id>', 'agent that should do it')
    .option('--priority <n>', 'higher runs first')
    .option('--dedup-key <key>', 'merge into a live item with the same kind and key')
    .option(
      '--idempotency-key <key>',
      'name this submission: run again, it answers the item made the first time instead of making another',
    )
    .option('--params <json>', 'parameters as a JSON object')
    .option('--parent <id>', 'parent work item')
    .option('--session <key>', 'session the work belongs to')
    .option('--json', 'print JSON')
    .addOption(urlOption('submit to a running agentd gateway instead of the database'))
    .addOption(tokenOption())
    .action(
      async (
        kind: string,
        words: string[],
        options: ReadOptions & {
          title?: string;
          agent?: string;
          priority?: string;
          dedupKey?: string;
          idempotencyKey?: string;
          params?: string;
          parent?: string;
          session?: string;
        },
      ) => {
        const submission = async () => {
          const params = options.params ? await parseParams(options.params) : {};
          const priority = parseInteger('--priority', options.priority);
          return {
            kind,
            description: words.join(' '),
            params,
            source: 'cli',
            ...(options.title ? { title: options.title } : {}),
            ...(options.agent ? { agentId: options.agent } : {}),
            ...(priority !== undefined ? { priority } : {}),
            ...(options.dedupKey ? { dedupKey: options.dedupKey } : {}),
            ...(options.idempotencyKey ? { idempotencyKey: options.idempotencyKey } : {}),
            ...(options.parent ? { parentId: options.parent } : {}),
            ...(options.session ? { sessionKey: options.session } : {}),
          };
        };
        const print = (result: SubmitAnswer) => {
          if (options.json) printJson(io, result);
          else
            io.stdout(
              `${result.merged ? `merged into ${result.id} (record ${result.mergedRecordId})` : result.id}${result.duplicate ? ' (submitted before under this idempotency key)' : ''}\n`,
            );
        };
        await change(
          options,
          async ({ queue }) => print(await queue.submit(await submission())),
          async (client) => print(await client.call<SubmitAnswer>('work.submit', await submission())),
        );
      },
    );

  work
    .command('list')
    .description('list work items, newest first')
    .addOption(statesOption)
    .option('--kind <kind>')
    .option('--agent <id>')
    .option('--session <key>')
    .option('--parent <id>')
    .option('--limit <n>', 'at most this many', '50')
    .option('--all', 'include system work (memory maintenance), which is hidden by default')
    .option('--system', 'only system work')
    .option('--json', 'print JSON')
    .addOption(urlOption('ask a running agentd gateway instead of the database'))
    .addOption(tokenOption())
    .action(
      async (
        options: ReadOptions & {
          state?: string;
          kind?: string;
          agent?: string;
          session?: string;
          parent?: string;
          limit?: string;
          all?: boolean;
          system?: boolean;
        },
      ) =>
        read(options, async (reader) => {
          const states = options.state ? parseStates(options.state, await loadWork()) : undefined;
          if (options.all && options.system) {
            throw new UserInputError({
              code: ErrorCodes.invalidRequest,
              message: 'give --all or --system, not both.',
            });
          }
          const workClass = options.system ? 'system' : options.all ? 'all' : 'user';
          const items = await reader.list({
            ...(states ? { states } : {}),
            workClass,
            ...(options.kind ? { kind: options.kind } : {}),
            ...(options.agent ? { agentId: options.agent } : {}),
            ...(options.session ? { sessionKey: options.session } : {}),
            ...(options.parent ? { parentId: options.parent } : {}),
            limit: parseInteger('--limit', options.limit) ?? 50,
          });
          if (options.json) {
            printJson(io, { items });
            return;
          }
          if (items.length === 0) {
            io.stdout('no work items\n');
            return;
          }
          const now = Date.now();
          io.stdout(
            `${['ID'.padEnd(32), 'STATE'.padEnd(10), 'KIND'.padEnd(14), 'AGENT'.padEnd(12), 'TRIES'.padEnd(6), 'AGE'.padEnd(6), 'TITLE'].join(' ')}\n`,
          );
          const { color } = terminalOf(io);
          for (const item of items) io.stdout(`${itemLine(item, now, color)}\n`);
        }),
    );

  work
    .command('show')
    .description('one work item with its children and ledger')
    .argument('<id>')
    .option('--json', 'print JSON')
    .addOption(urlOption('ask a running agentd gateway instead of the database'))
    .addOption(tokenOption())
    .action(async (id: string, options: ReadOptions) =>
      read(options, async (reader) => {
        const item = await reader.get(id);
        if (!item)
          throw new UserInputError({ code: ErrorCodes.notFound, message: `work item ${id} does not exist.` });
        const [children, entries] = await Promise.all([
          reader.list({ parentId: id, workClass: 'all', limit: 1_000, oldestFirst: true }),
          reader.ledger(id),
        ]);
        if (options.json) {
          printJson(io, { item, children, ledger: entries });
          return;
        }
        const { color } = terminalOf(io);
        io.stdout(`${describeItem(item, color, await loadWork())}\n`);
        if (children.length > 0) {
          io.stdout('  children:\n');
          for (const child of children)
            io.stdout(`    ${child.id}  ${paintState(color, child.state)}  ${child.title}\n`);
        }
        if (entries.length > 0)
          io.stdout(
            `  ledger:\n${(await loadLedger()).formatLedgerEntries(entries).replace(/^/gm, '    ')}\n`,
          );
      }),
    );

  work
    .command('cancel')
    .description('cancel a work item and its live children')
    .argument('<id>')
    .option('--reason <text>', 'why (in-process only: the server records its own reason)')
    .option('--json', 'print JSON')
    .addOption(urlOption('cancel it on a running agentd gateway'))
    .addOption(tokenOption())
    .action(async (id: string, options: ReadOptions & { reason?: string }) =>
      change(
        options,
        async ({ queue }) => {
          const item = await queue.cancel(id, { reason: options.reason ?? 'cancelled from the CLI' });
          if (options.json) printJson(io, { item });
          else io.stdout(`${item.id} cancelled\n`);
        },
        async (client) => {
          // The server's pool answers ids and skips an item that has ended; without a pool it answers items.
          const answer = await client.call<{ cancelled: Array<string | WorkItem> }>('work.cancel', { id });
          if (!answer.cancelled.some((entry) => (typeof entry === 'string' ? entry : entry.id) === id)) {
            const { item } = await client.call<{ item: WorkItem }>('work.get', { id });
            throw new UserInputError({
              code: (await loadWork()).WorkErrorCodes.invalidTransition,
              message: `work item ${id} is ${item.state}; it was not cancelled.`,
              details: { workItemId: id, state: item.state },
            });
          }
          if (options.json) printJson(io, answer);
          else io.stdout(`${id} cancelled\n`);
        },
      ),
    );

  work
    .command('block')
    .description('block a queued or running work item until someone unblocks it')
    .argument('<id>')
    .requiredOption('--reason <text>', 'what stops it')
    .option('--needs <text>', 'what would unblock it')
    .option('--json', 'print JSON')
    .addOption(urlOption('block it on a running agentd gateway'))
    .addOption(tokenOption())
    .action(async (id: string, options: ReadOptions & { reason: string; needs?: string }) => {
      const block = { reason: options.reason, ...(options.needs ? { needs: options.needs } : {}) };
      const print = (item: WorkItem) => {
        if (options.json) printJson(io, { item });
        else io.stdout(`${item.id} blocked: ${item.stateReason}\n`);
      };
      await change(
        options,
        async ({ queue, ledger }) => print(await (await loadWork()).blockWorkItem(queue, ledger, id, block)),
        async (client) => print((await client.call<{ item: WorkItem }>('work.block', { id, ...block })).item),
      );
    });

  work
    .command('unblock')
    .description('put a blocked work item back in the queue; --note is what its next run reads first')
    .argument('<id>')
    .option('--note <text>', 'the answer or the missing piece')
    .option('--json', 'print JSON')
    .addOption(urlOption('unblock it on a running agentd gateway'))
    .addOption(tokenOption())
    .action(async (id: string, options: ReadOptions & { note?: string }) => {
      const unblock = options.note ? { note: options.note } : {};
      const print = (item: WorkItem) => {
        if (options.json) printJson(io, { item });
        else io.stdout(`${item.id} queued again\n`);
      };
      await change(
        options,
        async ({ queue, ledger }) =>
          print(await (await loadWork()).unblockWorkItem(queue, ledger, id, unblock)),
        async (client) =>
          print((await client.call<{ item: WorkItem }>('work.unblock', { id, ...unblock })).item),
      );
    });

  const ledgerCommand = program.command('ledger').description('the typed work ledger');
  const typeOption = new Option('--type <type>', 'only one entry type');
  fillHelpWhenAsked(program, ledgerCommand, async () => {
    typeOption.description = `only one entry type: ${(await loadLedger()).ledgerEntryTypes.join(', ')}`;
  });
  ledgerCommand
    .command('show')
    .description("a work item's ledger entries")
    .argument('<id>', 'work item id')
    .addOption(typeOption)
    .option('--last <n>', 'only the last n entries')
    .option('--json', 'print JSON')
    .addOption(urlOption('read a ledger from a running agentd gateway (ledger.read)'))
    .addOption(tokenOption())
    .action(async (id: string, options: ReadOptions & { type?: string; last?: string }) => {
      const { formatLedgerEntries, ledgerEntryTypes } = await loadLedger();
      const print = (entries: LedgerEntry[]) => {
        if (options.json) printJson(io, { workItemId: id, entries });
        else
          io.stdout(entries.length ? `${formatLedgerEntries(entries)}\n` : `no ledger entries for ${id}\n`);
      };
      const check = () => {
        if (options.type && !(ledgerEntryTypes as ReadonlyArray<string>).includes(options.type)) {
          throw new UserInputError({
            code: ErrorCodes.invalidRequest,
            message: `unknown entry type ${options.type}; types are ${ledgerEntryTypes.join(', ')}.`,
          });
        }
        return parseInteger('--last', options.last);
      };
      await change(
        options,
        async ({ queue, ledger }) => {
          const lastN = check();
          // Chat sessions keep a ledger too (`session:<session id>`), with no work item behind it.
          if (!(await queue.get(id)) && (await ledger.read(id, { lastN: 1 })).length === 0)
            throw new UserInputError({
              code: ErrorCodes.notFound,
              message: `no work item or ledger named ${id}.`,
            });
          print(
            await ledger.read(id, {
              ...(options.type ? { entryType: options.type as LedgerEntryType } : {}),
              ...(lastN !== undefined ? { lastN } : {}),
            }),
          );
        },
        async (client) => {
          const lastN = check();
          const { entries } = await client.call<{ entries: LedgerEntry[] }>('ledger.read', {
            id,
            ...(options.type ? { entryType: options.type } : {}),
            ...(lastN !== undefined ? { lastN } : {}),
          });
          print(entries);
        },
      );
    });
}
