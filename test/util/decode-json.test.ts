import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { decodeJson, utf8BytesOver } from '../../src/util/index.js';
import { thrownBy } from '../helpers/thrown.js';

const point = z.object({ x: z.number(), y: z.number() });

describe('decodeJson', () => {
  it('decodes JSON of the schema, dropping keys it does not know', () => {
    expect(decodeJson('{"x":1,"y":2,"z":3}', point)).toEqual({ x: 1, y: 2 });
  });

  it('refuses text that is not JSON, with a stable code and the document named', () => {
    const error = thrownBy(() => decodeJson('{"x":', point, { what: 'point p1' }));
    expect(error).toMatchObject({ code: 'JSON_UNDECODABLE', fault: 'system' });
    expect(error.message).toContain('point p1 cannot be read: it is not JSON');
  });

  it('refuses JSON of another shape, listing where', () => {
    const error = thrownBy(() => decodeJson('{"x":"1"}', point, { fault: 'user' }));
    expect(error).toMatchObject({ code: 'JSON_UNDECODABLE', fault: 'user' });
    expect(error.details?.issues).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: ['x'] }),
        expect.objectContaining({ path: ['y'] }),
      ]),
    );
  });

  it('refuses a document over the size limit before parsing it', () => {
    const big = JSON.stringify({ x: 1, y: 2, pad: 'é'.repeat(600) });
    const error = thrownBy(() => decodeJson(big, point, { maxBytes: 1000 }));
    expect(error).toMatchObject({ code: 'JSON_UNDECODABLE', details: { maxBytes: 1000 } });
    expect(decodeJson(big, point, { maxBytes: 2000 })).toEqual({ x: 1, y: 2 });
  });
});

describe('utf8BytesOver', () => {
  it('counts UTF-8 bytes, not UTF-16 units, and only above the limit', () => {
    // Ten two-byte characters: 10 units, 20 bytes.
    expect(utf8BytesOver('é'.repeat(10), 19)).toBe(20);
    expect(utf8BytesOver('é'.repeat(10), 20)).toBeUndefined();
    expect(utf8BytesOver('a'.repeat(5), 4)).toBe(5);
    expect(utf8BytesOver('', 0)).toBeUndefined();
  });
});
