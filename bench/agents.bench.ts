// The multi-agent runtime at 10 and at 1,000 agents (seed 004 asks for 10 without degradation): spawn,
// one broadcast round through every agent's loop, and one heartbeat sweep; RSS per idle agent, broadcast
// fan-out time and event-loop lag.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { createAgentRuntime, createHeartbeat } from '../src/agents/index.js';
import { createBus } from '../src/bus/index.js';
import { createSqliteDatabase, migrate } from '../src/store/index.js';
import { createWorkQueue } from '../src/work/index.js';

const round = (value: number, digits = 2) => Number(value.toFixed(digits));

function settleMemory(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  return process.memoryUsage().rss;
}

async function scenario(agentCount: number, dir: string): Promise<Record<string, string | number>> {
  const db = createSqliteDatabase({ path: join(dir, `agents-${agentCount}.db`) });
  await migrate(db);
  const bus = createBus();
  const queue = createWorkQueue({ db, bus });
  let turns = 0;
  const runtime = createAgentRuntime({
    db,
    bus,
    runTurn: async (agent, message) => {
      turns++;
      return `${agent.name} ack ${message.content.length}`;
    },
  });
  const heartbeat = createHeartbeat({
    queue,
    bus,
    agents: () => runtime.listStates().map((agent) => agent.id),
  });
  try {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const rssBefore = settleMemory();
    const spawnStart = performance.now();
    for (let index = 0; index < agentCount; index++)
      await runtime.spawn({ id: `agent-${index}`, name: `Agent ${index}`, role: 'bench' });
    const spawnMs = performance.now() - spawnStart;
    for (let index = 0; index < agentCount; index++) await runtime.whenIdle(`agent-${index}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const rssIdle = settleMemory();

    const lag = monitorEventLoopDelay({ resolution: 1 });
    lag.enable();
    // The monitor's timer must be running before the broadcast: a block that starts in the same turn of the
    // event loop as enable() (a broadcast that wakes every agent at once) was not recorded.
    await new Promise((resolve) => setTimeout(resolve, 10));
    const broadcastStart = performance.now();
    const { delivered } = await runtime.broadcast({ content: 'all hands: status please' });
    const deliveredMs = performance.now() - broadcastStart;
    for (let index = 0; index < agentCount; index++) await runtime.whenIdle(`agent-${index}`);
    const roundMs = performance.now() - broadcastStart;
    // Let the monitor record the last interval (a blocked loop only shows up once its timer fires).
    await new Promise((resolve) => setTimeout(resolve, 5));
    lag.disable();

    // One work item per agent so the sweep has something to look at.
    for (let index = 0; index < agentCount; index++)
      await queue.submit({ kind: 'task', agentId: `agent-${index}`, description: 'pending' });
    const sweepStart = performance.now();
    const sweep = await heartbeat.sweep();
    const sweepMs = performance.now() - sweepStart;

    return {
      agents: agentCount,
      'spawn ms total': round(spawnMs, 1),
      'spawn ms per agent': round(spawnMs / agentCount, 3),
      'RSS KiB per idle agent': round((rssIdle - rssBefore) / 1024 / agentCount, 1),
      'broadcast deliver ms': round(deliveredMs, 2),
      'broadcast round ms (all answered)': round(roundMs, 1),
      'turns run': turns,
      delivered: delivered,
      'event-loop lag p99 ms': round(lag.percentile(99) / 1e6, 2),
      'event-loop lag max ms': round(lag.max / 1e6, 2),
      'lag samples': lag.count,
      'heartbeat sweep ms': round(sweepMs, 1),
      'agents swept': sweep.agents.length,
    };
  } finally {
    await heartbeat.stop();
    await runtime.close();
    await queue.close();
    await db.close();
  }
}

export default {
  name: 'agents',
  description:
    'multi-agent runtime at 10 and 1,000 agents: spawn, one broadcast round, one heartbeat sweep; RSS, fan-out, event-loop lag',
  async run() {
    const dir = mkdtempSync(join(tmpdir(), 'agentd-agents-bench-'));
    try {
      // Warm-up so module loading and JIT do not land on the first scenario.
      await scenario(10, dir);
      const rows = [await scenario(10, dir), await scenario(1_000, dir)];
      return {
        rows,
        notes: [
          'Each agent: a mailbox on disk (since 2026-12-06: a message is written before it is acknowledged, and its row deleted when its turn ends), its own loop, persisted definition; every state transition is published on the bus and written to agent_state_history (SQLite file, WAL).',
          'runTurn is instant (returns a short string), so the round measures the runtime itself: delivery, the idle → listening → thinking → speaking → idle transitions, conversation rows, and at most 16 turns at once (the default maxConcurrentTurns).',
          '"broadcast deliver ms": the broadcast() call (one transaction writing every mailbox row and conversation row, then the messages into the mailboxes in RAM; before 2026-12-06 into RAM only); "round": until every agent answered and is idle again.',
          'RSS per idle agent: RSS growth from before spawning to all agents idle, divided by the agent count (includes SQLite page cache growth; no forced GC unless node runs with --expose-gc).',
          'Event-loop lag: perf_hooks.monitorEventLoopDelay (1 ms resolution) during the broadcast round, started 10 ms before the broadcast (since 2026-12-06; before, it started in the same turn of the event loop, and missed a block that began there: the wake-up of every agent by a broadcast that wrote nothing first).',
          'Heartbeat sweep: one sweep over one queued work item per agent, reporting per agent.',
          'A warm-up 10-agent scenario runs first and is not reported.',
        ],
      };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
