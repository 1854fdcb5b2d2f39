import { describe, expect, it, vi } from 'vitest';
import { createStore } from '../../src/store/index.js';
import { createManualClock } from '../../src/util/index.js';
import { createWorkQueue, memoryMaintenanceKind } from '../../src/work/index.js';
import { dayMs, homeWithConfig, runtimeIn, useRuntimeHomes } from '../helpers/retention.js';

/**
 * A home whose agentd.yaml is `yaml` and whose queue holds work that ended `ageMs` ago: maintenance passes,
 * as an idle server piles them up, and a task.
 */
async function homeWithEndedWork(yaml: string, ageMs: number) {
  const home = homeWithConfig('agentd-work-retention-', yaml);
  const store = await createStore({ stateDir: home });
  const clock = createManualClock(Date.now() - ageMs);
  const queue = createWorkQueue({ db: store.db, clock });
  const end = async (kind: string) => {
    const { id } = await queue.submit({ kind, agentId: 'system', description: 'as the runtime does' });
    const claimed = await queue.claim('earlier-run', { kinds: [kind], start: true });
    if (claimed?.id !== id) throw new Error(`expected to claim ${id}`);
    await queue.complete(id, 'earlier-run');
    clock.advance(30_000);
    return id;
  };
  const maintenance: string[] = [];
  for (let pass = 0; pass < 5; pass++) maintenance.push(await end(memoryMaintenanceKind));
  const task = await end('task');
  await queue.close();
  await store.close();
  return { home, maintenance, task };
}

describe("the runtime's retention of ended work items", () => {
  const { homes, openIn } = useRuntimeHomes();

  it('deletes at start the maintenance passes that ended more than a day ago, and keeps the task', async () => {
    const { home, maintenance, task } = await homeWithEndedWork('', 3 * dayMs);
    homes.push(home);
    const runtime = await openIn(home);
    const { queue } = runtime.work;
    expect(await queue.getMany(maintenance)).toHaveLength(5);

    await runtime.startBackground();
    await vi.waitFor(async () => expect(await queue.getMany(maintenance)).toEqual([]), { timeout: 10_000 });
    expect((await queue.get(task))?.state).toBe('completed');
  });

  it('follows the work section of agentd.yaml', async () => {
    const left = async (yaml: string) => {
      const { home, maintenance, task } = await homeWithEndedWork(yaml, 3 * dayMs);
      homes.push(home);
      const runtime = await runtimeIn(home);
      await runtime.startBackground();
      // Closing waits for a prune that started, so what is there after close is what retention left.
      await runtime.close();
      const store = await createStore({ stateDir: home });
      try {
        return (await createWorkQueue({ db: store.db }).getMany([...maintenance, task])).length;
      } finally {
        await store.close();
      }
    };
    // System work is never kept longer than other work: all of it goes after two days.
    expect(await left('work:\n  retainEndedDays: 2\n  retainEndedSystemDays: 5\n')).toBe(0);
    expect(await left('work:\n  retainEndedDays: 0\n  retainEndedSystemDays: 0\n')).toBe(6);
  });
});
