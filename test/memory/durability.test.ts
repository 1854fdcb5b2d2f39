import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSqliteDatabase, migrate, type SqlDatabase } from '../../src/store/index.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

describe('memory durability on a SQLite file', () => {
  let dir: string;
  const open: SqlDatabase[] = [];
  const openDb = async (path: string) => {
    const db = createSqliteDatabase({ path });
    await migrate(db);
    open.push(db);
    return db;
  };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'agentd-memory-'));
  });
  afterEach(async () => {
    for (const db of open.splice(0)) await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('restores RAM, summaries and counters after the database is reopened', async () => {
    const path = join(dir, 'memory.db');
    const first = createHarness(await openDb(path), { config: { maxActiveEntries: 4 } });
    const ref = sessionRef();
    for (let index = 1; index <= 6; index++)
      await first.memory.append(ref, { role: 'user', content: `note ${index}` });
    await first.memory.summarize(ref, { maxEntries: 2 });
    await first.memory.appendBatch(ref, [
      { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'lookup', arguments: { q: 'x' } }] },
      { role: 'tool', content: 'found', toolCallId: 'c1', toolName: 'lookup', isError: false },
    ]);
    const before = await first.memory.load(ref);
    await open.pop()!.close();

    const second = createHarness(await openDb(path), { config: { maxActiveEntries: 4 } });
    const after = await second.memory.load(ref);
    expect(after).toEqual(before);
    expect(second.events[0]).toMatchObject({ kind: 'restored', count: after.length });
    expect(after.find((entry) => entry.role === 'tool')).toMatchObject({
      toolCallId: 'c1',
      toolName: 'lookup',
      isError: false,
    });
    const next = await second.memory.append(ref, { role: 'user', content: 'after restart' });
    expect(next.memoryId).toBeGreaterThan(Math.max(...before.map((entry) => entry.memoryId)));
    expect((await second.memory.search({ agentId: 'alpha', query: 'note' })).length).toBeGreaterThan(0);
  });

  it('keeps every entry whose append resolved when the process is killed with SIGKILL', async () => {
    const path = join(dir, 'killed.db');
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', fileURLToPath(new URL('./fixtures/append-child.ts', import.meta.url)), path],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const acknowledged: number[] = [];
    let stderr = '';
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child.on('exit', (_code, signal) => resolve(signal)),
    );
    await new Promise<void>((resolve, reject) => {
      let buffer = '';
      child.stdout.on('data', (chunk: Buffer) => {
        buffer += chunk.toString();
        const lines = buffer.split('\n');
        buffer = lines.pop()!;
        for (const line of lines) acknowledged.push(Number(line));
        if (acknowledged.length >= 60) {
          child.kill('SIGKILL');
          resolve();
        }
      });
      child.on('exit', () => reject(new Error(`child exited early: ${stderr}`)));
    });
    expect(await exited).toBe('SIGKILL');

    const { memory } = createHarness(await openDb(path), { config: { maxActiveEntries: 16 } });
    // The kill comes after the chunk of output that reached 60 lines, which on a loaded machine may carry
    // more lines than one query lists (128): every acknowledged id is looked up, a query per 100.
    const stored = [];
    for (let start = 0; start < acknowledged.length; start += 100)
      stored.push(
        ...(await memory.query({
          agentId: 'alpha',
          memoryIds: acknowledged.slice(start, start + 100).map((id) => `agent:alpha:main#${id}`),
          limit: 100,
        })),
      );
    expect(stored.map((item) => item.id).sort((left, right) => left - right)).toEqual(
      [...acknowledged].sort((left, right) => left - right),
    );
    const ref = { sessionId: 'durable', sessionKey: 'agent:alpha:main', agentId: 'alpha' };
    const active = await memory.load(ref);
    expect(active.length).toBeGreaterThan(0);
    expect(active.length).toBeLessThanOrEqual(16);
    const next = await memory.append(ref, { role: 'user', content: 'after the crash' });
    expect(next.memoryId).toBeGreaterThan(Math.max(...acknowledged));
  });
});
