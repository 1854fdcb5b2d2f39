// Loop overhead of agentd's engage loop against LangGraph.js, the OpenAI Agents SDK and Mastra on the same
// scripted scenario: every run is N tool turns (each turn: K parallel calls of no-op tools) and one final
// answer, with an instant in-process model. Also allocation per run and heap growth over 10,000 runs.
import { fork } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { closeSync, mkdtempSync, openSync, readFileSync, readSync, rmSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { createRequire } from 'node:module';
import { cpus, endianness, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { tool as langchainTool } from '@langchain/core/tools';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { Agent as MastraAgent } from '@mastra/core/agent';
import { createTool as createMastraTool } from '@mastra/core/tools';
import {
  type AgentOutputItem,
  Agent as OpenAiAgent,
  type Model as OpenAiModel,
  type ModelRequest as OpenAiModelRequest,
  type ModelResponse as OpenAiModelResponse,
  Runner as OpenAiRunner,
  Usage as OpenAiUsage,
  tool as openAiTool,
} from '@openai/agents';
import Database from 'better-sqlite3';
import { z } from 'zod';
import { type Bus, createBus } from '../src/bus/index.js';
import { type EngageResult, runEngage } from '../src/engage/index.js';
import { createLedger, type Ledger } from '../src/ledger/index.js';
import { createMemoryService, type MemoryService, type SessionRef } from '../src/memory/index.js';
import type { LanguageModel, ModelRequest, ModelStreamEvent } from '../src/model/index.js';
import { createStore } from '../src/store/index.js';
import {
  createLedgerTools,
  createToolRegistry,
  defineTool,
  type ToolDefinition,
} from '../src/tools/index.js';
import { median, percentile } from './stats.js';

/** One scenario, run identically by every contender. */
export interface Scenario {
  /** Model turns that call tools; one more turn gives the final answer. */
  toolTurns: number;
  /** Tool calls per tool turn, all requested in the same model response. */
  callsPerTurn: number;
  /** What each tool does. */
  work: () => Promise<void>;
}

export interface Contender {
  name: string;
  version: string;
  /** Runs the scenario once and returns how many tool executions happened (for a correctness check). */
  run(): Promise<number>;
  /** Releases what the contender holds (a database); called once after measuring. */
  close?(): Promise<void>;
}

const toolName = (index: number) => `noop_${index}`;
const callId = (turn: number, index: number) => `call_${turn}_${index}`;
const finalText = 'done';

function versionOf(pkg: string): string {
  const require = createRequire(import.meta.url);
  try {
    return (JSON.parse(readFileSync(require.resolve(`${pkg}/package.json`), 'utf8')) as { version: string })
      .version;
  } catch {
    // Packages whose exports map hides package.json.
    const entry = require.resolve(pkg);
    const root = entry.slice(0, entry.lastIndexOf(`/node_modules/${pkg}/`) + `/node_modules/${pkg}/`.length);
    return (JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { version: string }).version;
  }
}

// ---------------------------------------------------------------------------------------------- agentd
/**
 * What the durable variant keeps on disk: the work ledger, which the first call of every tool turn writes
 * (`ledger_append`, one commit each), and the transcript, written when the run finishes
 * (`beforeFinish`, one transaction, as a chat turn persists its reply).
 */
export interface DurableRun {
  bus: Bus;
  ledger: Ledger;
  memory: MemoryService;
  session: SessionRef;
}

export function agentdContender(
  scenario: Scenario,
  options: { maxParallelTools?: number; name?: string; durable?: DurableRun } = {},
): Contender {
  const { durable } = options;
  let executions = 0;
  const noopTools = Array.from({ length: scenario.callsPerTurn }, (_, index) =>
    defineTool({
      name: toolName(index),
      description: 'does nothing',
      input: z.object({}),
      execute: async () => {
        executions++;
        await scenario.work();
        return 'ok';
      },
    }),
  );
  const tools: ToolDefinition[] = durable ? [...noopTools, ...createLedgerTools(durable.ledger)] : noopTools;
  const registry = createToolRegistry(tools);
  const bus = durable?.bus ?? createBus();
  // The durable variant's first call of each turn writes a finding in place of a no-op.
  const toolCalls = (turn: number): ModelStreamEvent[] =>
    noopTools.map((_tool, index) => ({
      type: 'tool-call',
      toolCall:
        durable && index === 0
          ? {
              id: callId(turn, index),
              name: 'ledger_append',
              arguments: { entry_type: 'finding', content: `turn ${turn}: nothing to report` },
            }
          : { id: callId(turn, index), name: toolName(index), arguments: {} },
    }));
  const model: LanguageModel = {
    specificationVersion: 'v1',
    provider: 'bench',
    modelId: 'instant',
    contextWindowTokens: 128_000,
    async *doStream(request: ModelRequest) {
      let results = 0;
      for (const message of request.messages) if (message.role === 'tool') results++;
      const turn = results / scenario.callsPerTurn;
      // Event by event, as a provider adapter yields them (`yield*` over an array would add an
      // async-from-sync iterator and its promises per event, a cost of this fake, not of agentd).
      if (turn < scenario.toolTurns) for (const event of toolCalls(turn)) yield event;
      else yield { type: 'text-delta', text: finalText };
      yield { type: 'usage', usage: { inputTokens: 1, outputTokens: 1 } };
      yield { type: 'finish', stopReason: turn < scenario.toolTurns ? 'tool_calls' : 'end_turn' };
    },
  };
  const persistTranscript = durable
    ? async (result: EngageResult) => {
        await durable.memory.appendBatch(
          durable.session,
          result.newMessages.map((message) =>
            message.role === 'tool'
              ? {
                  role: 'tool' as const,
                  content: message.content,
                  toolCallId: message.toolCallId,
                  toolName: message.toolName,
                  isError: message.isError,
                }
              : message.role === 'assistant'
                ? { role: 'assistant' as const, content: message.content, toolCalls: message.toolCalls }
                : { role: message.role, content: message.content },
          ),
        );
      }
    : undefined;
  let runs = 0;
  return {
    name: options.name ?? 'agentd',
    version: (
      JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
    ).version,
    async run() {
      executions = 0;
      const result = await runEngage({
        model,
        messages: [{ role: 'user', content: 'go' }],
        tools: { registry },
        workspaceDir: '/tmp',
        // A work item per run, as work items are: each run's ledger starts empty.
        workItemId: durable ? `bench_${runs + 1}` : 'bench',
        scope: { runId: `run_${++runs}`, agentId: 'bench' },
        bus,
        limits: { maxTurns: scenario.toolTurns + 1, maxParallelTools: options.maxParallelTools ?? 8 },
        // With a ledger the nudge is on as by default; every turn writes the ledger, so it never fires.
        context: durable ? {} : { ledgerNudgeInterval: 0 },
        ...(durable ? { ledger: durable.ledger } : {}),
        ...(persistTranscript ? { beforeFinish: persistTranscript } : {}),
      });
      if (result.text !== finalText)
        throw new Error(`agentd ended with ${result.status}: ${result.error?.message}`);
      if (durable)
        for (const message of result.newMessages)
          if (message.role === 'tool' && message.content.startsWith('Recorded finding')) executions++;
      return executions;
    },
  };
}

/** The durable contender, with where its database file is (for the floor measurement). */
export interface DurableContender extends Contender {
  databasePath: string;
}

/** The agentd contender on a SQLite store in a temporary directory (WAL, synchronous=NORMAL: the defaults). */
export async function durableAgentdContender(scenario: Scenario): Promise<DurableContender> {
  const dir = mkdtempSync(join(tmpdir(), 'agentd-engage-bench-'));
  const bus = createBus();
  const store = await createStore({ stateDir: dir, bus });
  if (store.mode !== 'sqlite') throw new Error(`the store is not on disk: ${store.degradedReason}`);
  const ledger = createLedger({ db: store.db, bus });
  const memory = createMemoryService({ db: store.db, bus });
  const record = await store.sessions.ensureActive('agent:bench:engage', 'bench');
  const session = { sessionId: record.id, sessionKey: record.sessionKey, agentId: 'bench' };
  const contender = agentdContender(scenario, {
    name: 'agentd, ledger + transcript on SQLite',
    durable: { bus, ledger, memory, session },
  });
  return {
    ...contender,
    databasePath: join(dir, 'agentd.db'),
    async close() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * One call the store made on better-sqlite3: a transaction's control (BEGIN, COMMIT, SAVEPOINT …, run by
 * `exec` or as a prepared statement) or a statement's method.
 */
type RecordedSql =
  | { method: 'control'; sql: string }
  | { method: 'run' | 'get' | 'all'; sql: string; params: unknown[] };

const transactionControl = /^(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b/;

/**
 * The WAL's last valid frame, from the header of the WAL index (`-shm`; `mxFrame`, bytes 16–19, in the
 * byte order of the machine that wrote it): what a commit wrote is the difference before and after it, as
 * long as no checkpoint restarted the WAL in between (then the number goes down).
 */
function walFrames(databasePath: string): number {
  const header = Buffer.alloc(20);
  const fd = openSync(`${databasePath}-shm`, 'r');
  try {
    readSync(fd, header, 0, 20, 0);
  } finally {
    closeSync(fd);
  }
  return endianness() === 'LE' ? header.readUInt32LE(16) : header.readUInt32BE(16);
}

/**
 * Records every call the durable contender's store makes on better-sqlite3 during `runs` runs (statements
 * with their parameters, BEGIN and COMMIT included), one list per run, by wrapping the driver's methods
 * for that time only. Also counts the WAL frames (pages) the runs' commits wrote, the ledger's and the
 * transcript's apart, over the commits no checkpoint interrupted.
 */
async function recordDriverCalls(
  contender: DurableContender,
  runs: number,
): Promise<{ recorded: RecordedSql[][]; ledgerFrames: number; transcriptFrames: number; commits: number }> {
  const probe = new Database(':memory:');
  const statementProto = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<
    'run' | 'get' | 'all',
    (...params: unknown[]) => unknown
  >;
  probe.close();
  const databaseProto = Database.prototype as { exec: (sql: string) => unknown };
  const originals = {
    run: statementProto.run,
    get: statementProto.get,
    all: statementProto.all,
    exec: databaseProto.exec,
  };
  let current: RecordedSql[] = [];
  const frames = { ledger: 0, transcript: 0, commits: 0, last: walFrames(contender.databasePath) };
  const committed = (ledger: boolean) => {
    const now = walFrames(contender.databasePath);
    if (now >= frames.last) {
      frames[ledger ? 'ledger' : 'transcript'] += now - frames.last;
      frames.commits++;
    }
    frames.last = now;
  };
  for (const method of ['run', 'get', 'all'] as const) {
    const original = originals[method];
    statementProto[method] = function (this: Database.Statement, ...params: unknown[]) {
      const control = transactionControl.test(this.source);
      current.push(control ? { method: 'control', sql: this.source } : { method, sql: this.source, params });
      const result = original.apply(this, params);
      if (control ? this.source === 'COMMIT' : !this.database.inTransaction && !this.readonly)
        committed(this.source.includes('work_ledger'));
      return result;
    };
  }
  databaseProto.exec = function (this: Database.Database, sql: string) {
    current.push({ method: 'control', sql });
    const result = originals.exec.call(this, sql);
    if (sql === 'COMMIT') committed(false);
    return result;
  };
  const recorded: RecordedSql[][] = [];
  try {
    for (let run = 0; run < runs; run++) {
      current = [];
      await contender.run();
      recorded.push(current);
    }
  } finally {
    statementProto.run = originals.run;
    statementProto.get = originals.get;
    statementProto.all = originals.all;
    databaseProto.exec = originals.exec;
  }
  return {
    recorded,
    ledgerFrames: frames.ledger / runs,
    transcriptFrames: frames.transcript / runs,
    commits: frames.commits,
  };
}

/**
 * The durable run's SQLite floor: the SQL a durable run sent to better-sqlite3, replayed on better-sqlite3
 * alone, with the same transactions and commits, on a copy of the contender's database made just before the
 * recorded runs (so every replayed run meets the state its recorded run met). Timed in rounds interleaved
 * with fresh durable runs, so both see the same machine load. Returns µs per run: the durable runs, the
 * replays, and the commits the replays made per run.
 */
export async function durableFloor(contender: DurableContender, rounds: number, runsPerRound: number) {
  const copyPath = `${contender.databasePath}.floor`;
  const source = new Database(contender.databasePath, { readonly: true });
  source.exec(`VACUUM INTO '${copyPath}'`);
  source.close();
  const { recorded, ledgerFrames, transcriptFrames } = await recordDriverCalls(
    contender,
    rounds * runsPerRound,
  );
  const floor = new Database(copyPath);
  try {
    floor.pragma('journal_mode = WAL');
    floor.pragma('synchronous = NORMAL');
    floor.pragma('foreign_keys = ON');
    // agentd's store checkpoints the WAL every 8,000 pages (src/store/sqlite-database.ts), not SQLite's 1,000.
    floor.pragma('wal_autocheckpoint = 8000');
    const prepared = new Map<string, Database.Statement>();
    const statementOf = (sql: string) => {
      let statement = prepared.get(sql);
      if (!statement) {
        statement = floor.prepare(sql);
        prepared.set(sql, statement);
      }
      return statement;
    };
    // Prepared before timing, as the store's statement cache holds them in steady state.
    for (const run of recorded) for (const call of run) statementOf(call.sql);
    // What each replayed commit took (a transaction from BEGIN to COMMIT, or one autocommitted statement),
    // split by what it wrote: the ledger, or the transcript (memory).
    let ledgerUs = 0;
    let transcriptUs = 0;
    const ledgerUsPerRun: number[] = [];
    const transcriptUsPerRun: number[] = [];
    const replay = (run: RecordedSql[]) => {
      ledgerUs = 0;
      transcriptUs = 0;
      let began = 0;
      let inTransaction = false;
      let ledger = false;
      for (const call of run) {
        if (call.method === 'control') {
          if (call.sql.startsWith('BEGIN')) {
            began = performance.now();
            inTransaction = true;
            ledger = false;
          }
          statementOf(call.sql).run();
          if (call.sql === 'COMMIT') {
            inTransaction = false;
            if (ledger) ledgerUs += (performance.now() - began) * 1000;
            else transcriptUs += (performance.now() - began) * 1000;
          }
          continue;
        }
        if (!inTransaction) began = performance.now();
        if (call.sql.includes('work_ledger')) ledger = true;
        statementOf(call.sql)[call.method](...call.params);
        if (!inTransaction) {
          if (ledger) ledgerUs += (performance.now() - began) * 1000;
          else transcriptUs += (performance.now() - began) * 1000;
          ledger = false;
        }
      }
      ledgerUsPerRun.push(ledgerUs);
      transcriptUsPerRun.push(transcriptUs);
    };
    const durableUs: number[] = [];
    const floorUs: number[] = [];
    const durableCpuUs: number[] = [];
    const floorCpuUs: number[] = [];
    let next = 0;
    for (let round = 0; round < rounds; round++) {
      const steps: Array<() => Promise<void>> = [
        async () => {
          const started = performance.now();
          const cpuStarted = process.cpuUsage();
          for (let index = 0; index < runsPerRound; index++) await contender.run();
          const cpu = process.cpuUsage(cpuStarted);
          durableUs.push(((performance.now() - started) * 1000) / runsPerRound);
          durableCpuUs.push((cpu.user + cpu.system) / runsPerRound);
        },
        async () => {
          const started = performance.now();
          const cpuStarted = process.cpuUsage();
          for (let index = 0; index < runsPerRound; index++) replay(recorded[next++]!);
          const cpu = process.cpuUsage(cpuStarted);
          floorUs.push(((performance.now() - started) * 1000) / runsPerRound);
          floorCpuUs.push((cpu.user + cpu.system) / runsPerRound);
        },
      ];
      for (const step of round % 2 === 0 ? steps : steps.reverse()) await step();
    }
    // COMMITs, and statements that wrote outside a transaction (each its own commit).
    let commits = 0;
    let open = false;
    for (const call of recorded[0]!) {
      if (call.method === 'control') {
        if (call.sql.startsWith('BEGIN')) open = true;
        if (call.sql === 'COMMIT') {
          open = false;
          commits++;
        }
      } else if (!open && !/^\s*SELECT/i.test(call.sql)) commits++;
    }
    const ledgerCommits = recorded[0]!.filter(
      (call) => call.method !== 'control' && call.sql.startsWith('INSERT INTO work_ledger ('),
    ).length;
    return {
      durableUs: median(durableUs),
      floorUs: median(floorUs),
      durableCpuUs: median(durableCpuUs),
      floorCpuUs: median(floorCpuUs),
      /** The replay split by what its commits wrote: the ledger's, and the transcript's (medians per run). */
      floorLedgerUs: median(ledgerUsPerRun),
      floorTranscriptUs: median(transcriptUsPerRun),
      commits,
      ledgerCommits,
      /** WAL frames (4 KiB pages) a run's commits wrote, averaged over the recorded runs. */
      ledgerFrames,
      transcriptFrames,
    };
  } finally {
    floor.close();
    rmSync(copyPath, { force: true });
    rmSync(`${copyPath}-wal`, { force: true });
    rmSync(`${copyPath}-shm`, { force: true });
  }
}

/**
 * What one durable ledger append costs against SQLite's own commit of the same row, measured side by side
 * in interleaved rounds: `ledger.append` through agentd's store (a work item's ledger, as the durable
 * contender writes it), its statement (`INSERT … SELECT MAX(seq) + 1 … RETURNING`) autocommitted on
 * better-sqlite3 directly, on the table as migrations/sqlite/0025_ledger_keyed.sql keys it and as
 * 0003_ledger_skills.sql made it (a rowid table, its key's index and a type/time index), the head-counter
 * append agentd made before (two statements in a `BEGIN IMMEDIATE … COMMIT`, on the 0003 table), and the
 * ledger row alone as one autocommitted INSERT. Each on its own file in a temporary directory, WAL and
 * synchronous=NORMAL like agentd's store.
 */
export async function ledgerCommitCosts(rounds: number, appendsPerRound: number) {
  const dir = mkdtempSync(join(tmpdir(), 'agentd-ledger-commit-'));
  const bus = createBus();
  const store = await createStore({ stateDir: join(dir, 'agentd'), bus });
  const ledger = createLedger({ db: store.db, bus });
  const bare = new Database(join(dir, 'bare.db'));
  try {
    bare.pragma('journal_mode = WAL');
    bare.pragma('synchronous = NORMAL');
    bare.exec(`CREATE TABLE work_ledger (work_item_id TEXT NOT NULL, seq INTEGER NOT NULL, entry_type TEXT NOT NULL,
        content TEXT NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (work_item_id, seq)) WITHOUT ROWID;
      CREATE INDEX work_ledger_findings_by_time ON work_ledger (created_at) WHERE entry_type = 'finding';
      CREATE TABLE work_ledger_0003 (work_item_id TEXT NOT NULL, seq INTEGER NOT NULL, entry_type TEXT NOT NULL,
        content TEXT NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (work_item_id, seq));
      CREATE INDEX work_ledger_0003_by_type_time ON work_ledger_0003 (entry_type, created_at);
      CREATE TABLE work_ledger_heads (work_item_id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL);`);
    const appendStatementOn = (table: string) =>
      bare.prepare(
        `INSERT INTO ${table} (work_item_id, seq, entry_type, content, created_at)
         SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ? FROM ${table} WHERE work_item_id = ? RETURNING seq`,
      );
    const appendStatement = appendStatementOn('work_ledger');
    const appendStatement0003 = appendStatementOn('work_ledger_0003');
    const bumpHead = bare.prepare(
      `INSERT INTO work_ledger_heads (work_item_id, last_seq) VALUES (?, 1)
       ON CONFLICT (work_item_id) DO UPDATE SET last_seq = work_ledger_heads.last_seq + 1 RETURNING last_seq`,
    );
    const insertEntry = bare.prepare(
      'INSERT INTO work_ledger (work_item_id, seq, entry_type, content, created_at) VALUES (?, ?, ?, ?, ?)',
    );
    const insertEntry0003 = bare.prepare(
      'INSERT INTO work_ledger_0003 (work_item_id, seq, entry_type, content, created_at) VALUES (?, ?, ?, ?, ?)',
    );
    const begin = bare.prepare('BEGIN IMMEDIATE');
    const commit = bare.prepare('COMMIT');
    let appended = 0;
    const content = () => `turn ${appended % 10}: nothing to report`;
    const variants: Array<[string, () => unknown]> = [
      [
        'ledger.append',
        () => ledger.append(`bench_${appended >> 4}`, { entryType: 'finding', content: content() }),
      ],
      [
        'the same statement, autocommitted',
        () => {
          const workItemId = `same_${appended >> 4}`;
          appendStatement.get(workItemId, 'finding', content(), Date.now(), workItemId);
        },
      ],
      [
        'the same statement on the table of migration 0003 (rowid, key index, type/time index)',
        () => {
          const workItemId = `same_${appended >> 4}`;
          appendStatement0003.get(workItemId, 'finding', content(), Date.now(), workItemId);
        },
      ],
      [
        'the two statements of the head-counter append + COMMIT (table of 0003)',
        () => {
          const workItemId = `bare_${appended >> 4}`;
          begin.run();
          const { last_seq } = bumpHead.get(workItemId) as { last_seq: number };
          insertEntry0003.run(workItemId, last_seq, 'finding', content(), Date.now());
          commit.run();
        },
      ],
      [
        'the row alone, one autocommitted INSERT',
        () => insertEntry.run(`row_${appended}`, 1, 'finding', content(), Date.now()),
      ],
    ];
    const samples = new Map<string, number[]>(variants.map(([name]) => [name, []]));
    const cpuSamples = new Map<string, number[]>(variants.map(([name]) => [name, []]));
    for (let round = -1; round < rounds; round++) {
      for (const [name, write] of round % 2 === 0 ? variants : [...variants].reverse()) {
        const started = performance.now();
        const cpuStarted = process.cpuUsage();
        for (let index = 0; index < appendsPerRound; index++, appended++) await write();
        const cpu = process.cpuUsage(cpuStarted);
        // Round -1 warms up.
        if (round >= 0) {
          samples.get(name)!.push(((performance.now() - started) * 1000) / appendsPerRound);
          cpuSamples.get(name)!.push((cpu.user + cpu.system) / appendsPerRound);
        }
      }
    }
    return variants.map(([name]) => ({
      name,
      medianUs: median(samples.get(name)!),
      medianCpuUs: median(cpuSamples.get(name)!),
    }));
  } finally {
    bare.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

// ------------------------------------------------------------------------------------------- LangGraph
/** A chat model that answers from the conversation alone: tool calls until enough results are in. */
class ScriptedChatModel extends BaseChatModel {
  constructor(private readonly scenario: Scenario) {
    super({});
  }
  _llmType(): string {
    return 'bench-scripted';
  }
  override bindTools(): this {
    return this;
  }
  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    let results = 0;
    for (const message of messages) if (message.getType() === 'tool') results++;
    const turn = results / this.scenario.callsPerTurn;
    const message =
      turn < this.scenario.toolTurns
        ? new AIMessage({
            content: '',
            tool_calls: Array.from({ length: this.scenario.callsPerTurn }, (_, index) => ({
              id: callId(turn, index),
              name: toolName(index),
              args: {},
              type: 'tool_call' as const,
            })),
          })
        : new AIMessage(finalText);
    return { generations: [{ message, text: typeof message.content === 'string' ? message.content : '' }] };
  }
}

export function langGraphContender(scenario: Scenario): Contender {
  let executions = 0;
  const tools = Array.from({ length: scenario.callsPerTurn }, (_, index) =>
    langchainTool(
      async () => {
        executions++;
        await scenario.work();
        return 'ok';
      },
      { name: toolName(index), description: 'does nothing', schema: z.object({}) },
    ),
  );
  const agent = createReactAgent({ llm: new ScriptedChatModel(scenario), tools });
  return {
    name: 'LangGraph.js createReactAgent',
    version: versionOf('@langchain/langgraph'),
    async run() {
      executions = 0;
      const state = await agent.invoke(
        { messages: [{ role: 'user', content: 'go' }] },
        { recursionLimit: 4 * scenario.toolTurns + 10 },
      );
      const last = state.messages.at(-1);
      if (last?.content !== finalText) throw new Error('LangGraph run did not finish');
      return executions;
    },
  };
}

// ---------------------------------------------------------------------------------- OpenAI Agents SDK
class ScriptedOpenAiModel implements OpenAiModel {
  constructor(private readonly scenario: Scenario) {}
  async getResponse(request: OpenAiModelRequest): Promise<OpenAiModelResponse> {
    let results = 0;
    if (Array.isArray(request.input))
      for (const item of request.input) if (item.type === 'function_call_result') results++;
    const turn = results / this.scenario.callsPerTurn;
    const output: AgentOutputItem[] =
      turn < this.scenario.toolTurns
        ? Array.from({ length: this.scenario.callsPerTurn }, (_, index) => ({
            type: 'function_call' as const,
            callId: callId(turn, index),
            name: toolName(index),
            arguments: '{}',
            status: 'completed' as const,
          }))
        : [
            {
              type: 'message',
              role: 'assistant',
              status: 'completed',
              content: [{ type: 'output_text', text: finalText }],
            },
          ];
    return { usage: new OpenAiUsage(), output };
  }
  // biome-ignore lint/correctness/useYield: the benchmark only uses non-streamed runs
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('streaming is not used in this benchmark');
  }
}

export function openAiAgentsContender(scenario: Scenario): Contender {
  let executions = 0;
  const tools = Array.from({ length: scenario.callsPerTurn }, (_, index) =>
    openAiTool({
      name: toolName(index),
      description: 'does nothing',
      parameters: z.object({}),
      execute: async () => {
        executions++;
        await scenario.work();
        return 'ok';
      },
    }),
  );
  const agent = new OpenAiAgent({
    name: 'bench',
    instructions: 'bench',
    model: new ScriptedOpenAiModel(scenario),
    tools,
  });
  const runner = new OpenAiRunner({ tracingDisabled: true });
  return {
    name: 'OpenAI Agents SDK Runner',
    version: versionOf('@openai/agents'),
    async run() {
      executions = 0;
      const result = await runner.run(agent, 'go', { maxTurns: scenario.toolTurns + 2 });
      if (result.finalOutput !== finalText) throw new Error('OpenAI Agents run did not finish');
      return executions;
    },
  };
}

// --------------------------------------------------------------------------------------------- Mastra
/** A hand-written AI SDK v5 (LanguageModelV2) model; Mastra 0.24's `generate` drives v2 models. */
function scriptedMastraModel(scenario: Scenario) {
  const turnOf = (prompt: Array<{ role: string; content: unknown }>) => {
    let results = 0;
    for (const message of prompt)
      if (message.role === 'tool') results += (message.content as unknown[]).length;
    return results / scenario.callsPerTurn;
  };
  const reply = (turn: number) => ({
    content:
      turn < scenario.toolTurns
        ? Array.from({ length: scenario.callsPerTurn }, (_, index) => ({
            type: 'tool-call' as const,
            toolCallId: callId(turn, index),
            toolName: toolName(index),
            input: '{}',
          }))
        : [{ type: 'text' as const, text: finalText }],
    finishReason: turn < scenario.toolTurns ? ('tool-calls' as const) : ('stop' as const),
    usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 },
  });
  return {
    specificationVersion: 'v2' as const,
    provider: 'bench',
    modelId: 'instant',
    supportedUrls: {},
    async doGenerate(options: { prompt: Array<{ role: string; content: unknown }> }) {
      return { ...reply(turnOf(options.prompt)), warnings: [] };
    },
    async doStream(options: { prompt: Array<{ role: string; content: unknown }> }) {
      const { content, finishReason, usage } = reply(turnOf(options.prompt));
      const parts: unknown[] = [{ type: 'stream-start', warnings: [] }];
      for (const part of content) {
        if (part.type === 'text')
          parts.push(
            { type: 'text-start', id: 't' },
            { type: 'text-delta', id: 't', delta: part.text },
            { type: 'text-end', id: 't' },
          );
        else parts.push(part);
      }
      parts.push({ type: 'finish', finishReason, usage });
      return {
        stream: new ReadableStream({
          start(controller) {
            for (const part of parts) controller.enqueue(part);
            controller.close();
          },
        }),
      };
    },
  };
}

export function mastraContender(scenario: Scenario): Contender {
  let executions = 0;
  const tools = Object.fromEntries(
    Array.from({ length: scenario.callsPerTurn }, (_, index) => [
      toolName(index),
      createMastraTool({
        id: toolName(index),
        description: 'does nothing',
        inputSchema: z.object({}),
        execute: async () => {
          executions++;
          await scenario.work();
          return 'ok';
        },
      }),
    ]),
  );
  const agent = new MastraAgent({
    name: 'bench',
    instructions: 'bench',
    // The hand-written model satisfies LanguageModelV2 structurally; the v2 types are not exported by Mastra.
    model: scriptedMastraModel(scenario) as any,
    tools,
  });
  return {
    name: 'Mastra Agent.generate',
    version: versionOf('@mastra/core'),
    async run() {
      executions = 0;
      // Mastra's workflow engine adds an abort listener to the run's signal for every step and never removes
      // it, so 11 steps print Node's MaxListenersExceededWarning (seen with --trace-warnings: Workflow.execute
      // in @mastra/core). Signals created during a Mastra run get room for its steps; agentd's keep Node's 10.
      const defaultMax = EventEmitter.defaultMaxListeners;
      EventEmitter.defaultMaxListeners = Math.max(defaultMax, scenario.toolTurns + 1 + defaultMax);
      let result: Awaited<ReturnType<typeof agent.generate>>;
      try {
        result = await agent.generate('go', { maxSteps: scenario.toolTurns + 1 });
      } finally {
        EventEmitter.defaultMaxListeners = defaultMax;
      }
      if (result.text !== finalText)
        throw new Error(`Mastra run did not finish (text ${JSON.stringify(result.text)})`);
      return executions;
    },
  };
}

// ------------------------------------------------------------------------------------------ measuring
export function exposeGc(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/** Bytes allocated per run (collected objects included), from V8's sampling heap profiler. */
async function allocatedBytesPerRun(contender: Contender, runs: number): Promise<number> {
  const session = new Session();
  session.connect();
  try {
    await session.post('HeapProfiler.enable');
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: 512,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    for (let index = 0; index < runs; index++) await contender.run();
    const { profile } = await session.post('HeapProfiler.stopSampling');
    let total = 0;
    const walk = (node: { selfSize: number; children: Array<{ selfSize: number; children: unknown[] }> }) => {
      total += node.selfSize;
      for (const child of node.children) walk(child as typeof node);
    };
    walk(profile.head as Parameters<typeof walk>[0]);
    return total / runs;
  } finally {
    await session.post('HeapProfiler.disable').catch(() => {});
    session.disconnect();
  }
}

/**
 * Retained heap over `runs` sequential runs, measured after forced GC at `checkpoints` evenly spaced
 * points: total growth, and the least-squares slope in bytes per run (robust to one noisy reading).
 */
async function heapGrowth(contender: Contender, runs: number, checkpoints: number, gc: () => void) {
  const settle = () => {
    gc();
    gc();
    return process.memoryUsage().heapUsed;
  };
  // Warm-up first, so lazily compiled code and V8 feedback are not counted as growth.
  for (let index = 0; index < 1000; index++) await contender.run();
  const points: Array<[number, number]> = [[0, settle()]];
  for (let checkpoint = 1; checkpoint <= checkpoints; checkpoint++) {
    const target = Math.round((runs * checkpoint) / checkpoints);
    for (let done = points.at(-1)![0]; done < target; done++) await contender.run();
    points.push([target, settle()]);
  }
  const meanX = points.reduce((sum, [x]) => sum + x, 0) / points.length;
  const meanY = points.reduce((sum, [, y]) => sum + y, 0) / points.length;
  let numerator = 0;
  let denominator = 0;
  for (const [x, y] of points) {
    numerator += (x - meanX) * (y - meanY);
    denominator += (x - meanX) ** 2;
  }
  return { growthBytes: points.at(-1)![1] - points[0]![1], slopeBytesPerRun: numerator / denominator };
}

const scenario: Scenario = { toolTurns: 10, callsPerTurn: 3, work: async () => {} };
const rounds = 5;
const runsPerRound = 10;
const warmUpRuns = 100;
/** Fresh processes per contender for the table of each contender measured alone. */
const aloneProcesses = 3;
/** Least milliseconds of warm-up runs, and of timed runs, of a contender alone. */
const aloneMinMs = 1000;
/** Interleaved rounds of the durable floor's measurement (durable runs against their SQL replayed). */
const floorRounds = 2 * rounds;

/** Every contender, by label, in the order they are measured. */
const contenderBuilders: ReadonlyArray<readonly [string, () => Contender | Promise<Contender>]> = [
  ['agentd', () => agentdContender(scenario)],
  ['agentd (durable)', () => durableAgentdContender(scenario)],
  ['LangGraph.js', () => langGraphContender(scenario)],
  ['OpenAI Agents SDK', () => openAiAgentsContender(scenario)],
  ['Mastra', () => mastraContender(scenario)],
];

/** Builds a contender and checks that it runs the scenario as specified. */
async function checkedContender(make: () => Contender | Promise<Contender>): Promise<Contender> {
  const contender = await make();
  try {
    const executed = await contender.run();
    const expected = scenario.toolTurns * scenario.callsPerTurn;
    if (executed !== expected) throw new Error(`executed ${executed} tool calls, expected ${expected}`);
    return contender;
  } catch (error) {
    await contender.close?.();
    throw error;
  }
}

/** Times one contender's runs of a round, each run one sample (µs), after a forced GC when `gc` is given. */
async function timeRound(
  contender: Contender,
  gc: (() => void) | undefined,
  samples: number[],
): Promise<void> {
  gc?.();
  for (let index = 0; index < runsPerRound; index++) {
    const started = performance.now();
    await contender.run();
    samples.push((performance.now() - started) * 1000);
  }
}

// A child process that measures one contender alone: nothing else has run in it, so no other framework's
// code, garbage or JIT state is in the process (the shared table interleaves all of them in one process).
const aloneLabel = process.env.AGENTD_ENGAGE_BENCH_ALONE;
if (aloneLabel !== undefined) {
  const builder = contenderBuilders.find(([label]) => label === aloneLabel);
  if (!builder) throw new Error(`no contender ${aloneLabel}`);
  const gc = exposeGc();
  const contender = await checkedContender(builder[1]);
  const warmUpStarted = performance.now();
  for (let index = 0; index < warmUpRuns || performance.now() - warmUpStarted < aloneMinMs; index++)
    await contender.run();
  // A cheap contender's 5 rounds last a few milliseconds, where one collection or recompilation moves the
  // median: rounds go on until the timed runs add up to a second.
  const timedRounds = async (collectFirst: (() => void) | undefined) => {
    const samples: number[] = [];
    let timedUs = 0;
    for (let round = 0; round < rounds || timedUs < aloneMinMs * 1000; round++) {
      const before = samples.length;
      await timeRound(contender, collectFirst, samples);
      for (let index = before; index < samples.length; index++) timedUs += samples[index]!;
    }
    return samples;
  };
  // First the steady state, each run paying for the collections its garbage brings as they come; then as the
  // shared process times, a forced GC before each round. A full collection with no run in flight frees every
  // hidden class only a run's objects had, and V8 then deoptimises the optimised code that checks for them
  // (its `--trace-deopt` says "weak objects"): each round after a forced GC starts on code being optimised again.
  const samples = await timedRounds(undefined);
  const samplesAfterGc = await timedRounds(gc);
  // The durable contender's SQL replayed on better-sqlite3 alone, in this same process, as the shared
  // process measures it.
  const floor =
    'databasePath' in contender
      ? await durableFloor(contender as DurableContender, floorRounds, runsPerRound)
      : undefined;
  await contender.close?.();
  // Disconnected once the message is written: under tsx's loader (`npm run bench`) a send is not yet
  // written when it returns, and disconnecting at once dropped it.
  process.send!({ samples, samplesAfterGc, floor }, undefined, undefined, () => process.disconnect());
}

type FloorFigures = Awaited<ReturnType<typeof durableFloor>>;

/** One contender alone in a fresh process: its median µs a run, and the durable floor when it has one. */
async function medianAlone(label: string): Promise<AloneFigures> {
  const child = fork(fileURLToPath(import.meta.url), [], {
    execArgv: ['--import', 'tsx', '--expose-gc'],
    env: { ...process.env, AGENTD_ENGAGE_BENCH_ALONE: label },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const message = await new Promise<{ samples: number[]; samplesAfterGc: number[]; floor?: FloorFigures }>(
    (resolve, reject) => {
      child.once('message', resolve);
      child.once('exit', (code) =>
        reject(new Error(`${label} alone exited with ${code} before its samples`)),
      );
    },
  );
  await new Promise((resolve) =>
    child.exitCode === null ? child.once('exit', resolve) : resolve(undefined),
  );
  const figures = { medianUs: median(message.samples), medianAfterGcUs: median(message.samplesAfterGc) };
  return message.floor ? { ...figures, floor: message.floor } : figures;
}

/** What one process of a contender alone measured: µs a run in the steady state and after a forced GC. */
interface AloneFigures {
  medianUs: number;
  medianAfterGcUs: number;
  floor?: FloorFigures;
}

/** Each contender in `aloneProcesses` fresh processes, interleaved: what each process measured. */
async function measureAlone(labels: ReadonlyArray<string>): Promise<Map<string, AloneFigures[]>> {
  const measured = new Map<string, AloneFigures[]>(labels.map((label) => [label, []]));
  for (let index = 0; index < aloneProcesses; index++)
    for (const label of labels) measured.get(label)!.push(await medianAlone(label));
  return measured;
}

export default {
  name: 'engage-loop',
  description:
    'agent-loop overhead: 10 tool turns × 3 parallel no-op tools + a final answer, instant model; agentd vs LangGraph.js, OpenAI Agents SDK, Mastra',
  async run() {
    const gc = exposeGc();
    const notes: string[] = [
      `Machine load average when the benchmark started: ${loadavg()
        .map((load) => load.toFixed(1))
        .join(
          ' / ',
        )} (1 / 5 / 15 min) on ${cpus().length} cores shared with other work; compare ratios, not absolute times.`,
    ];
    const contenders: Contender[] = [];
    const labels: string[] = [];
    try {
      for (const [label, make] of contenderBuilders) {
        try {
          contenders.push(await checkedContender(make));
          labels.push(label);
        } catch (error) {
          notes.push(`${label} could not run the scenario and is left out: ${(error as Error).message}`);
        }
      }
      return await measure(contenders, labels, notes, gc);
    } finally {
      for (const contender of contenders) await contender.close?.();
    }
  },
};

/** Times, allocation and (for agentd) heap growth of the contenders that ran the scenario. */
async function measure(contenders: Contender[], labels: string[], notes: string[], gc: () => void) {
  // Warm-up, then interleaved rounds so machine load hits every contender alike. 10 warm-up runs were too
  // few: code that runs once per run (a run's setup and loop) was still unoptimised in the timed runs.
  for (const contender of contenders) for (let index = 0; index < warmUpRuns; index++) await contender.run();
  const samples = new Map<Contender, number[]>(contenders.map((contender) => [contender, []]));
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? contenders : [...contenders].reverse();
    // Each contender's runs start on a heap just collected: none is timed collecting the garbage of the one
    // before it (the peers leave 5-14 MiB a run).
    for (const contender of order) await timeRound(contender, gc, samples.get(contender)!);
  }
  const allocation = new Map<Contender, number>();
  for (const contender of contenders) allocation.set(contender, await allocatedBytesPerRun(contender, 20));
  const alone = await measureAlone(labels);
  const perTurn = (us: number) => us / (scenario.toolTurns + 1);

  const agentd = contenders.find((contender) => contender.name === 'agentd');
  const agentdMedian = agentd ? median(samples.get(agentd)!) : undefined;
  const rows = contenders.map((contender, index) => {
    const sorted = [...samples.get(contender)!].sort((left, right) => left - right);
    const runMedian = percentile(sorted, 50);
    const aloneTurns = (figure: (figures: AloneFigures) => number) => {
      const medians = alone
        .get(labels[index]!)!
        .map((figures) => perTurn(figure(figures)))
        .sort((left, right) => left - right);
      return `${Math.round(percentile(medians, 50))} (${medians.map(Math.round).join(', ')})`;
    };
    return {
      contender: contender.name,
      version: contender.version,
      'median µs / run': Math.round(runMedian),
      'p90 µs / run': Math.round(percentile(sorted, 90)),
      'median µs / turn': Math.round(perTurn(runMedian)),
      [`alone: median µs / turn (${aloneProcesses} processes)`]: aloneTurns(({ medianUs }) => medianUs),
      [`alone, a forced GC before each ${runsPerRound} runs`]: aloneTurns(
        ({ medianAfterGcUs }) => medianAfterGcUs,
      ),
      'KiB allocated / run': Math.round(allocation.get(contender)! / 1024),
      'time vs agentd': agentdMedian ? `${(runMedian / agentdMedian).toFixed(1)}×` : '',
    };
  });

  if (agentd) {
    const heapRuns = 10_000;
    const growth = await heapGrowth(agentd, heapRuns, 5, gc);
    notes.push(
      `agentd heap over ${heapRuns.toLocaleString('en')} sequential runs (after 1,000 warm-up runs; forced GC at 0, 2,000, …, 10,000 runs): ` +
        `${(growth.growthBytes / 1024).toFixed(1)} KiB from first to last reading; least-squares slope ` +
        `${growth.slopeBytesPerRun.toFixed(2)} bytes per run.`,
    );
  }
  const durable = contenders.find((contender): contender is DurableContender => 'databasePath' in contender);
  if (durable) {
    const floor = await durableFloor(durable, floorRounds, runsPerRound);
    const turns = scenario.toolTurns + 1;
    const perTurn = (us: number) => (us / turns).toFixed(0);
    notes.push(
      `Durable floor (${floorRounds} interleaved rounds × ${runsPerRound} runs, medians, wall / CPU): a durable run ${floor.durableUs.toFixed(0)} / ${floor.durableCpuUs.toFixed(0)} µs (${perTurn(floor.durableUs)} / ${perTurn(floor.durableCpuUs)} µs/turn); ` +
        `the same SQL replayed on better-sqlite3 alone, ${floor.commits} commits a run, ${floor.floorUs.toFixed(0)} / ${floor.floorCpuUs.toFixed(0)} µs (${perTurn(floor.floorUs)} / ${perTurn(floor.floorCpuUs)} µs/turn): ` +
        `agentd's overhead above SQLite's own work ${perTurn(floor.durableUs - floor.floorUs)} / ${perTurn(floor.durableCpuUs - floor.floorCpuUs)} µs/turn. ` +
        `Of the replay (medians, wall): the ledger's ${floor.ledgerCommits} appends ${floor.floorLedgerUs.toFixed(0)} µs a run, the transcript's commits ${floor.floorTranscriptUs.toFixed(0)} µs a run. ` +
        `WAL frames (4 KiB pages) the recorded runs' commits wrote, a run: the ledger's ${floor.ledgerFrames.toFixed(1)}, the transcript's ${floor.transcriptFrames.toFixed(1)}. ` +
        'The SQL is recorded from runs of the durable contender (every statement with its parameters, BEGIN and COMMIT) and replayed on a copy of its database made just before them (VACUUM INTO), each run on the state its recorded run met.',
    );
  }
  const aloneFloors = [...alone.values()].flat().flatMap(({ floor }) => (floor ? [floor] : []));
  if (aloneFloors.length > 0) {
    const turns = scenario.toolTurns + 1;
    const each = (figure: (floor: FloorFigures) => number) =>
      aloneFloors.map((floor) => (figure(floor) / turns).toFixed(0)).join(', ');
    notes.push(
      `The durable floor alone (the durable contender's processes of the "alone" column, in each after its timing, measured as above, µs a turn wall, one figure per process): a durable run ${each((floor) => floor.durableUs)}; the same SQL replayed on better-sqlite3 alone ${each((floor) => floor.floorUs)}; agentd's part above SQLite's own work ${each((floor) => floor.durableUs - floor.floorUs)}.`,
    );
  }
  const commits = await ledgerCommitCosts(rounds, 200);
  notes.push(
    `One durable ledger append against SQLite's own commit of the same row (${rounds} interleaved rounds × 200 writes after one warm-up round, median µs per write wall / CPU, WAL + synchronous=NORMAL in the same temporary directory): ${commits
      .map(({ name, medianUs, medianCpuUs }) => `${name} ${medianUs.toFixed(0)} / ${medianCpuUs.toFixed(0)}`)
      .join('; ')}.`,
  );
  notes.push(
    `A run = ${scenario.toolTurns} model turns that each request ${scenario.callsPerTurn} no-op tool calls (run in parallel by every framework) + 1 turn with the final answer; "µs / turn" divides by ${scenario.toolTurns + 1} model turns.`,
    `"alone": each contender measured again in ${aloneProcesses} fresh processes of its own (the processes interleaved across contenders), each process at least ${warmUpRuns} warm-up runs and ${aloneMinMs} ms of them, then rounds of ${runsPerRound} timed runs one after another, at least ${rounds} rounds and until the timed runs add up to ${aloneMinMs} ms, each run paying for the collections its garbage brings as they come: the median of the processes' medians, then each process's median. In the shared process the contenders' code, garbage and JIT state share one heap; alone, none does. Then, in the same processes, rounds with a forced GC before each, as the shared process times them, until their runs too add up to ${aloneMinMs} ms (the "alone" column until 2026-12-07): a full collection with no run in flight frees the hidden classes only a run's objects had, and V8 deoptimises the optimised code that checks for them (\`--trace-deopt\`: "weak objects"), so each such round times code being optimised again; a cheap run pays most for it, ${runsPerRound} runs being a short round.`,
    `Timing: ${rounds} interleaved rounds × ${runsPerRound} runs per contender after ${warmUpRuns} warm-up runs each (10 before 2026-11-26); each sample is one whole run (performance.now); a forced GC before each contender's runs of a round (since 2026-11-29), so none is timed collecting the garbage of the contender before it.`,
    'Models are in-process fakes that answer instantly from the conversation: agentd LanguageModel (v1 spec, through the model call wrapper: streamModelTo), a LangChain BaseChatModel subclass (createReactAgent + ToolNode), an @openai/agents Model (Runner, tracing disabled), an AI SDK v5 LanguageModelV2 object (Mastra Agent.generate, no memory/storage).',
    'agentd runs with no ledger, hooks or policy (the peers have none); bus events are published as in production.',
    '"agentd, ledger + transcript on SQLite" is the same loop with its state durable: a SQLite store in a temporary directory (WAL, synchronous=NORMAL, as agentd runs it), a work item per run, the first call of each tool turn a `ledger_append` of a finding in place of a no-op (one commit each), and the transcript (41 messages) appended to the session\'s memory in one transaction by `beforeFinish` before the run reports its end, as a chat turn does (once the session is at its memory limits, memory evicts the oldest entries in that same commit: their tombstones, states and event; in a second commit before 2026-11-28).',
    'Allocation: V8 sampling heap profiler (512-byte interval, objects later collected included) over 20 runs, divided by 20.',
  );
  return { rows, notes };
}
