import { describe, expect, it } from 'vitest';
import { createLogRing } from '../../src/telemetry/index.js';

const lines = (count: number, from = 0) =>
  Array.from({ length: count }, (_, index) => `{"n":${from + index}}\n`).join('');

describe('log ring', () => {
  it('keeps whole lines across chunk boundaries and answers the last ones', () => {
    const ring = createLogRing();
    ring.write('{"a":');
    ring.write('1}\n{"b":2}\n{"c"');
    expect(ring.tail({ limit: 10, maxBytes: 1000 }).lines).toEqual(['{"a":1}', '{"b":2}']);
    ring.write(':3}\n');
    const tail = ring.tail({ limit: 2, maxBytes: 1000 });
    expect(tail).toEqual({
      cursor: 24,
      size: 24,
      lines: ['{"b":2}', '{"c":3}'],
      truncated: true,
      reset: false,
    });
  });

  it('follows a cursor: only newer lines, oldest first, in pages', () => {
    const ring = createLogRing();
    ring.write(lines(3));
    const first = ring.tail({ limit: 100, maxBytes: 10_000 });
    ring.write(lines(5, 3));
    const page = ring.tail({ cursor: first.cursor, limit: 2, maxBytes: 10_000 });
    expect(page.lines).toEqual(['{"n":3}', '{"n":4}']);
    expect(page.truncated).toBe(true);
    const rest = ring.tail({ cursor: page.cursor, limit: 100, maxBytes: 10_000 });
    expect(rest.lines).toEqual(['{"n":5}', '{"n":6}', '{"n":7}']);
    const none = ring.tail({ cursor: rest.cursor, limit: 100, maxBytes: 10_000 });
    expect(none).toMatchObject({ lines: [], cursor: rest.cursor, truncated: false, reset: false });
  });

  it('is bounded by lines and bytes, and reports a cursor that fell off the start as a reset', () => {
    const ring = createLogRing({ maxLines: 4, maxBytes: 1_000 });
    ring.write(lines(10));
    const all = ring.tail({ limit: 100, maxBytes: 10_000 });
    expect(all.lines).toEqual(['{"n":6}', '{"n":7}', '{"n":8}', '{"n":9}']);
    const stale = ring.tail({ cursor: 0, limit: 100, maxBytes: 10_000 });
    expect(stale).toMatchObject({ reset: true, lines: all.lines });
    expect(ring.tail({ cursor: 10_000, limit: 1, maxBytes: 10_000 })).toMatchObject({ reset: true });

    const small = createLogRing({ maxBytes: 20 });
    small.write(lines(5));
    expect(small.tail({ limit: 100, maxBytes: 10_000 }).lines).toEqual(['{"n":3}', '{"n":4}']);
    // The answer's own byte limit keeps the newest lines.
    expect(small.tail({ limit: 100, maxBytes: 9 })).toMatchObject({ lines: ['{"n":4}'], truncated: true });
  });
});
