import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { createLedger } from '../../src/ledger/index.js';
import { createSqliteDatabase, migrate, type SqlDatabase } from '../../src/store/index.js';
import type { ToolContext } from '../../src/tools/index.js';
import { createManualClock, silentLogger } from '../../src/util/index.js';
import { buildAwarenessDigest, createChildWorkTools, createWorkQueue } from '../../src/work/index.js';

let dir: string;
const opened: SqlDatabase[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agentd-work-restart-'));
});
afterEach(async () => {
  for (const db of opened.splice(0)) await db.close();
  rmSync(dir, { recursive: true, force: true });
});

async function open(path: string): Promise<SqlDatabase> {
  const db = createSqliteDatabase({ path });
  await migrate(db);
  opened.push(db);
  return db;
}

describe('restart safety', () => {
  it('a parent awaiting children resumes after a restart and sees their outcomes', async () => {
    const path = join(dir, 'state.db');
    const clock = createManualClock();

    // Process 1: the parent runs, spawns a child, starts awaiting it, and the process dies.
    {
      const db = await open(path);
      const bus = createBus({ clock });
      const queue = createWorkQueue({ db, bus, clock, config: { leaseMs: 10_000 } });
      const ledger = createLedger({ db, clock });
      const [spawnTool, awaitTool] = createChildWorkTools({ queue, bus, ledger });
      const { id: parentId } = await queue.submit({ kind: 'task', description: 'parent work' });
      await queue.claim('w1');
      await queue.start(parentId, 'w1');
      const controller = new AbortController();
      const context: ToolContext = {
        runId: 'r1',
        agentId: 'main',
        toolCallId: 'c1',
        workspaceDir: dir,
        signal: controller.signal,
        bus,
        logger: silentLogger,
        workItemId: parentId,
      };
      await spawnTool!.execute({ kind: 'child', description: 'child work' }, context);
      const waiting = awaitTool!.execute(
        { ids: [(await queue.list({ parentId }))[0]!.id], timeoutSeconds: 600 },
        context,
      );
      await new Promise<void>((resolve) => bus.on('work:waiting', () => resolve()));
      // The process dies: nothing runs after this point, the waiting tool never returns.
      controller.abort();
      await expect(waiting).rejects.toMatchObject({ code: 'ABORTED' });
      await db.close();
      opened.pop();
    }

    // Process 2: opens the same file later, after the dead worker's lease lapsed.
    clock.advance(60_000);
    const db = await open(path);
    const bus = createBus({ clock });
    const queue = createWorkQueue({ db, bus, clock, config: { leaseMs: 10_000 } });
    const ledger = createLedger({ db, clock });
    const [parent] = await queue.list({ kind: 'task' });
    const [child] = await queue.list({ kind: 'child' });
    expect(parent!.state).toBe('running');
    expect(parent!.waitingOn).toEqual([child!.id]);

    const reaped = await queue.reapExpiredLeases();
    expect(reaped.blocked).toEqual([parent!.id]);
    // Blocked parents are not claimable: only the child is.
    const claimedChild = await queue.claim('w2');
    expect(claimedChild?.id).toBe(child!.id);
    await queue.start(child!.id, 'w2');
    await ledger.append(child!.id, { entryType: 'finding', content: 'the answer is 42' });
    await queue.complete(child!.id, 'w2', { data: { summary: 'answered' } });

    // The child's completion re-queued the parent; it runs again and finds the child's result.
    const resumed = await queue.claim('w3');
    expect(resumed?.id).toBe(parent!.id);
    await queue.start(parent!.id, 'w3');
    const [spawnTool, awaitTool] = createChildWorkTools({ queue, bus, ledger });
    const context: ToolContext = {
      runId: 'r2',
      agentId: 'main',
      toolCallId: 'c2',
      workspaceDir: dir,
      signal: new AbortController().signal,
      bus,
      logger: silentLogger,
      workItemId: parent!.id,
    };
    const respawn = JSON.parse(
      (await spawnTool!.execute({ kind: 'child', description: 'child work' }, context)) as string,
    );
    expect(respawn).toMatchObject({ id: child!.id, existing: true });
    const awaited = JSON.parse(
      (await awaitTool!.execute({ ids: [child!.id], timeoutSeconds: 600 }, context)) as string,
    );
    expect(awaited.children[0]).toMatchObject({
      state: 'completed',
      outcome: { data: { summary: 'answered' } },
    });
    expect(awaited.children[0].ledger).toContain('the answer is 42');
    const digest = await buildAwarenessDigest({
      workItem: (await queue.get(parent!.id))!,
      queue,
      ledger,
      now: clock.now(),
    });
    expect(digest).toContain('Your child work:');
    expect(digest).toContain('completed — answered');
    await queue.complete(parent!.id, 'w3', { data: { summary: 'parent done' } });
    expect((await queue.list({})).filter((item) => item.state === 'completed')).toHaveLength(2);
  });

  it('kill -9 of a worker process mid-task: the item runs again after lease expiry and completes exactly once', async () => {
    const path = join(dir, 'state.db');
    const db = await open(path);
    const bus = createBus();
    const completions: string[] = [];
    bus.on('work:completed', (event) => completions.push(event.data.workItemId));
    const leaseMs = 300;
    const queue = createWorkQueue({ db, bus, config: { leaseMs, pollIntervalMs: 1_000 } });
    const first = await queue.submit({ kind: 'task', description: 'one' });
    const second = await queue.submit({ kind: 'task', description: 'two' });

    const script = fileURLToPath(new URL('./fixtures/kill-worker.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', script, path, String(leaseMs)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let output = '';
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('started ')) resolve();
      });
      child.on('exit', (code) => reject(new Error(`worker exited early with ${code}: ${output}`)));
    });
    expect(output).toContain(`completed ${first.id}`);
    expect(output).toContain(`started ${second.id}`);
    const exited = new Promise((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');

    // The item is still leased to the dead worker; this process waits for the lease deadline, not a fixed sleep.
    expect((await queue.get(second.id))?.state).toBe('running');
    let claimed = await queue.claim('survivor');
    while (!claimed) {
      await queue.waitForWork();
      claimed = await queue.claim('survivor');
    }
    expect(claimed).toMatchObject({ id: second.id, attempts: 2 });
    await queue.start(second.id, 'survivor');
    await queue.complete(second.id, 'survivor', { data: { by: 'survivor' } });

    expect(completions).toEqual([second.id]);
    const items = await queue.getMany([first.id, second.id]);
    expect(items.map((item) => [item.state, item.attempts])).toEqual([
      ['completed', 1],
      ['completed', 2],
    ]);
    expect(items[0]!.outcome?.data).toEqual({ by: `child-${child.pid}` });
    expect(items[1]!.outcome?.data).toEqual({ by: 'survivor' });
    expect(await queue.claim('survivor')).toBeUndefined();
  });
});
