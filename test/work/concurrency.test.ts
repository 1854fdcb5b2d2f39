import { describe, expect, it, vi } from 'vitest';
import { createBus } from '../../src/bus/index.js';
import { createPostgresDatabase } from '../../src/store/index.js';
import { createWorkQueue } from '../../src/work/index.js';
import { describeEachDatabase, postgresTestBackend } from '../helpers/databases.js';

describeEachDatabase('concurrent claims', (getDb) => {
  it('two workers claiming at once never get the same item and together take them all', async () => {
    const submitter = createWorkQueue({ db: getDb() });
    const ids = new Set<string>();
    for (let index = 0; index < 40; index++)
      ids.add((await submitter.submit({ kind: 'task', description: `job ${index}` })).id);
    const workerA = createWorkQueue({ db: getDb() });
    const workerB = createWorkQueue({ db: getDb() });
    const drain = async (queue: typeof workerA, workerId: string) => {
      const mine: string[] = [];
      for (;;) {
        const batch = await queue.claimBatch(workerId, 3);
        expect(batch.length).toBeLessThanOrEqual(3);
        if (batch.length === 0) return mine;
        mine.push(...batch.map((item) => item.id));
      }
    };
    const [a, b] = await Promise.all([drain(workerA, 'a'), drain(workerB, 'b')]);
    const all = [...a, ...b];
    expect(new Set(all).size).toBe(all.length);
    expect(new Set(all)).toEqual(ids);
  });
});

describe('postgres across connections', async () => {
  const backend = await postgresTestBackend();
  const server = backend.kind === 'server' ? backend.url : undefined;

  it.skipIf(!server)(
    'SKIP LOCKED with two separate pools, and LISTEN/NOTIFY wake-ups and remote completions',
    async () => {
      // Named like the helper's schemas (creation time first): its sweep of schemas left behind by killed
      // runs reads that time, and would take any other name for an old one and drop it mid-test.
      const schema = `agentd_t_${Date.now().toString(36)}_${process.pid}_work`;
      const admin = createPostgresDatabase({ connectionString: server!, poolSize: 1 });
      await admin.run(`CREATE SCHEMA ${schema}`);
      const first = createPostgresDatabase({ connectionString: server!, schema, poolSize: 4 });
      const second = createPostgresDatabase({ connectionString: server!, schema, poolSize: 4 });
      const channel = `agentd_work_t${process.pid}`;
      try {
        const { migrate } = await import('../../src/store/index.js');
        await migrate(first);
        const producerBus = createBus();
        const consumerBus = createBus();
        const producer = createWorkQueue({ db: first, bus: producerBus, notifyChannel: channel });
        const consumer = createWorkQueue({
          db: second,
          bus: consumerBus,
          listenConnectionString: server,
          notifyChannel: channel,
          config: { pollIntervalMs: 600_000 },
        });
        await consumer.whenListening();

        // A submission in the other "process" wakes a waiter at once (the poll interval is ten minutes).
        const since = consumer.wakeSequence;
        const woken = consumer.waitForWork(undefined, { sinceSequence: since });
        const { id } = await producer.submit({ kind: 'task', description: 'remote', sessionKey: 'chat-1' });
        await woken;
        // The wait may also end on its own read of the deadlines, which can see the item before the
        // notification lands; the notification must still come, and only it can move the sequence here.
        await vi.waitFor(() => expect(consumer.wakeSequence).toBeGreaterThan(since), { timeout: 5000 });

        // A completion in the other process arrives on this process's bus, marked remote.
        const remoteDone = new Promise<{ workItemId: string; remote?: boolean }>((resolve) =>
          consumerBus.on('work:completed', (event) => resolve(event.data)),
        );
        await producer.claim('p');
        await producer.start(id, 'p');
        await producer.complete(id, 'p', { data: { summary: 'ok' } });
        expect(await remoteDone).toMatchObject({ workItemId: id, remote: true });

        // Two pools racing with SKIP LOCKED split the work without overlap.
        for (let index = 0; index < 60; index++)
          await producer.submit({ kind: 'race', description: `${index}` });
        const drain = async (queue: typeof producer, workerId: string) => {
          const mine: string[] = [];
          for (;;) {
            const batch = await queue.claimBatch(workerId, 2, { kinds: ['race'] });
            expect(batch.length).toBeLessThanOrEqual(2);
            if (batch.length === 0) return mine;
            mine.push(...batch.map((item) => item.id));
          }
        };
        const results = await Promise.all([
          drain(producer, 'a'),
          drain(consumer, 'b'),
          drain(producer, 'c'),
          drain(consumer, 'd'),
        ]);
        const all = results.flat();
        expect(all).toHaveLength(60);
        expect(new Set(all).size).toBe(60);
        await consumer.close();
        await producer.close();
      } finally {
        await first.close();
        await second.close();
        await admin.run(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await admin.close();
      }
    },
  );
});
