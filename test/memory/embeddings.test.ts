import { describe, expect, it } from 'vitest';
import { createHashingEmbedder, createOpenAiEmbedder } from '../../src/memory/index.js';

describe('embedding providers', () => {
  it('the hashing embedder is deterministic, normalized and puts related words near each other', async () => {
    const embedder = createHashingEmbedder({ dimensions: 64 });
    const [a, b, c, again] = await embedder.embed([
      'photography trip',
      'photos from the trip',
      'tax return deadline',
      'photography trip',
    ]);
    expect(Array.from(again!)).toEqual(Array.from(a!));
    const dot = (x: Float32Array, y: Float32Array) =>
      x.reduce((sum, value, index) => sum + value * y[index]!, 0);
    expect(dot(a!, a!)).toBeCloseTo(1, 5);
    expect(dot(a!, b!)).toBeGreaterThan(dot(a!, c!));
  });

  it('the OpenAI-compatible client posts to /embeddings and orders vectors by index', async () => {
    const calls: Array<{ url: string; body: unknown; auth: string | null }> = [];
    const fetch = (async (url: string, init: RequestInit) => {
      calls.push({
        url,
        body: JSON.parse(String(init.body)),
        auth: new Headers(init.headers).get('authorization'),
      });
      return new Response(
        JSON.stringify({
          data: [
            { index: 1, embedding: [0, 2] },
            { index: 0, embedding: [3, 4] },
          ],
        }),
        { status: 200 },
      );
    }) as typeof globalThis.fetch;
    const embedder = createOpenAiEmbedder({
      baseUrl: 'http://127.0.0.1:9/v1/',
      model: 'm',
      apiKey: 'k',
      dimensions: 2,
      fetch,
    });
    const vectors = await embedder.embed(['a', 'b']);
    expect(vectors.map((vector) => Array.from(vector))).toEqual([
      [0.6, 0.8].map((value) => Math.fround(value)),
      [0, 1],
    ]);
    expect(calls).toEqual([
      {
        url: 'http://127.0.0.1:9/v1/embeddings',
        body: { model: 'm', input: ['a', 'b'], dimensions: 2 },
        auth: 'Bearer k',
      },
    ]);
  });

  it('maps HTTP failures and malformed bodies to provider errors', async () => {
    const reply = (status: number, body: string) =>
      createOpenAiEmbedder({
        baseUrl: 'http://x',
        model: 'm',
        fetch: (async () => new Response(body, { status })) as typeof globalThis.fetch,
      });
    await expect(reply(429, 'slow down').embed(['a'])).rejects.toMatchObject({
      code: 'PROVIDER_RATE_LIMITED',
      retryable: true,
    });
    await expect(reply(401, 'no').embed(['a'])).rejects.toMatchObject({ code: 'PROVIDER_AUTH' });
    await expect(reply(200, '{"data":"nope"}').embed(['a'])).rejects.toMatchObject({
      code: 'PROVIDER_ERROR',
    });
    await expect(reply(200, '{"data":[]}').embed(['a'])).rejects.toMatchObject({ code: 'PROVIDER_ERROR' });
  });
});
