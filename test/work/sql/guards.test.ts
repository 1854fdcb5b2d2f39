import { describe, expect, it } from 'vitest';
import { inList, leaseExpired, pgArray, refusal, stateGuard } from '../../../src/work/sql/guards.js';
import { WorkErrorCodes, workStates } from '../../../src/work/states.js';
import type { WorkItem } from '../../../src/work/types.js';

const item = (overrides: Partial<WorkItem>): WorkItem =>
  ({ id: 'work-1', state: 'running', leaseOwner: 'w1', ...overrides }) as WorkItem;

describe('work sql guards', () => {
  it('writes a state guard as the complement of the allowed states', () => {
    const guard = stateGuard(['claimed', 'running']);
    expect(guard.params).toEqual(workStates.filter((state) => state !== 'claimed' && state !== 'running'));
    expect(guard.sql).toBe(`state NOT IN (${guard.params.map(() => '?').join(', ')})`);
  });

  it('quotes Postgres array elements so a comma, quote or backslash stays inside its element', () => {
    expect(pgArray(['a', 'b,c', 'say "hi"', 'back\\slash', null])).toBe(
      '{"a","b,c","say \\"hi\\"","back\\\\slash",NULL}',
    );
    expect(pgArray([])).toBe('{}');
    expect(inList([1, 2, 3])).toBe('?, ?, ?');
  });

  it('explains a refused transition from the item as it is now', () => {
    expect(refusal('work-9', undefined, 'completed', ['running'], 'w1').code).toBe('NOT_FOUND');
    const lapsed = refusal('work-1', item({}), 'completed', ['claimed', 'running'], 'w1');
    expect(lapsed.code).toBe(WorkErrorCodes.leaseExpired);
    expect(lapsed.message).toContain('the lease expired');
    const stolen = refusal('work-1', item({ leaseOwner: 'w2' }), 'completed', ['running'], 'w1');
    expect(stolen.message).toContain('held by w2');
    const requeued = refusal(
      'work-1',
      item({ state: 'queued', leaseOwner: null }),
      'completed',
      ['running'],
      'w1',
    );
    expect(requeued.code).toBe(WorkErrorCodes.leaseExpired);
    const illegal = refusal('work-1', item({ state: 'completed' }), 'paused', ['queued'], undefined);
    expect(illegal.code).toBe(WorkErrorCodes.invalidTransition);
    expect(illegal.details).toMatchObject({ from: 'completed', to: 'paused' });
    expect(leaseExpired('work-1', 'why').details).toEqual({ workItemId: 'work-1' });
  });
});
