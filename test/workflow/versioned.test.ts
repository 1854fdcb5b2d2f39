import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { decodeJson } from '../../src/util/index.js';
import { versioned } from '../../src/workflow/versioned.js';
import { thrownBy } from '../helpers/thrown.js';

const point = z.object({ x: z.number(), y: z.number() });

describe('versioned', () => {
  // Version 1 renamed `pos` to `x`; version 2 added `y` with a default of 0.
  const current = versioned(2, point, {
    0: ({ pos, ...rest }) => ({ ...rest, x: pos }),
    1: (record) => ({ y: 0, ...record }),
  });

  it('upgrades older records step by step and reads current ones as they are', () => {
    expect(decodeJson('{"pos":4}', current)).toEqual({ x: 4, y: 0 });
    expect(decodeJson('{"schemaVersion":1,"x":5}', current)).toEqual({ x: 5, y: 0 });
    expect(decodeJson('{"schemaVersion":2,"x":5,"y":6}', current)).toEqual({ x: 5, y: 6 });
  });

  it('refuses a record written by a newer version', () => {
    const error = thrownBy(() => decodeJson('{"schemaVersion":3,"x":1,"y":1}', current));
    expect(error.code).toBe('JSON_UNDECODABLE');
    expect(error.message).toContain('written by a newer agentd (version 3; this build reads up to 2)');
  });

  it('refuses a malformed version and a non-object record', () => {
    expect(thrownBy(() => decodeJson('{"schemaVersion":"2"}', current)).message).toContain('schemaVersion');
    expect(thrownBy(() => decodeJson('{"schemaVersion":1.5}', current)).message).toContain('whole number');
    expect(thrownBy(() => decodeJson('[1]', current)).message).toContain('expected an object');
  });

  it('reports what the upgraded record lacks', () => {
    expect(thrownBy(() => decodeJson('{"schemaVersion":2,"x":1}', current)).details?.issues).toEqual([
      expect.objectContaining({ path: ['y'] }),
    ]);
  });
});
