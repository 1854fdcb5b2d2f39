import { describe, expect, it } from 'vitest';
import { once } from '../../src/util/index.js';

describe('once', () => {
  it('runs its work at the first call only, and gives every caller the promise that ends with it', async () => {
    let runs = 0;
    let finish!: () => void;
    const closing = once(async () => {
      runs++;
      // Already started while the work's own first steps run: a caller checking it then sees the close.
      expect(closing.started).toBe(true);
      await new Promise<void>((resolve) => {
        finish = resolve;
      });
    });
    expect(closing.started).toBe(false);
    const ended: string[] = [];
    const first = closing.run().then(() => ended.push('first'));
    const second = closing.run().then(() => ended.push('second'));
    await new Promise((resolve) => setImmediate(resolve));
    expect([runs, ended]).toEqual([1, []]);
    finish();
    await Promise.all([first, second]);
    expect(ended.sort()).toEqual(['first', 'second']);
    await closing.run();
    expect(runs).toBe(1);
  });

  it('hands a failure to every caller without running the work again', async () => {
    let runs = 0;
    const failing = once(async () => {
      runs++;
      throw new Error('the close failed');
    });
    await expect(failing.run()).rejects.toThrow('the close failed');
    await expect(failing.run()).rejects.toThrow('the close failed');
    expect(runs).toBe(1);
  });
});
