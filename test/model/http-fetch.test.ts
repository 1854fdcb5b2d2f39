import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpFetch } from '../../src/model/http-fetch.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** A server whose routes answer as the tests need; it records every request and every connection. */
function startServer(): Promise<{
  server: Server;
  base: string;
  seen: Seen[];
  connections: Socket[];
  hanging: ServerResponse[];
}> {
  const seen: Seen[] = [];
  const connections: Socket[] = [];
  const hanging: ServerResponse[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      body += chunk;
    });
    request.on('end', () => {
      seen.push({ method: request.method!, url: request.url!, headers: request.headers, body });
      const path = request.url!;
      if (path === '/json') {
        response.writeHead(201, { 'content-type': 'application/json', 'x-request-id': 'req-1' });
        response.end(JSON.stringify({ echoed: body, method: request.method }));
      } else if (path === '/gzip') {
        response.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
        response.end(gzipSync(JSON.stringify({ packed: 'ünïcode ✓' })));
      } else if (path === '/sse') {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.write('data: one\n\n');
        setTimeout(() => response.end('data: two\n\n'), 20);
      } else if (path === '/half') {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.write('data: first\n\n');
        hanging.push(response);
      } else if (path === '/hang') {
        hanging.push(response);
      } else if (path.startsWith('/to/')) {
        const [, , status, ...rest] = path.split('/');
        response.writeHead(Number(status), { location: `/${rest.join('/')}` });
        response.end();
      } else if (path === '/loop') {
        response.writeHead(302, { location: '/loop' });
        response.end();
      } else if (path === '/elsewhere') {
        response.writeHead(307, { location: `${process.env.HTTP_FETCH_TEST_OTHER_ORIGIN}/json` });
        response.end();
      } else if (path === '/huge-header') {
        response.writeHead(200, { 'x-huge': 'x'.repeat(100_000) });
        response.end('never read');
      } else {
        response.writeHead(404, { 'content-type': 'text/plain' });
        response.end('not here');
      }
    });
  });
  server.on('connection', (socket) => connections.push(socket));
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        server,
        base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        seen,
        connections,
        hanging,
      }),
    ),
  );
}

let served: Awaited<ReturnType<typeof startServer>>;
let other: Awaited<ReturnType<typeof startServer>>;

beforeAll(async () => {
  served = await startServer();
  other = await startServer();
  process.env.HTTP_FETCH_TEST_OTHER_ORIGIN = other.base;
});

afterAll(async () => {
  for (const response of [...served.hanging, ...other.hanging]) response.destroy();
  await Promise.all(
    [served, other].map(
      ({ server }) =>
        new Promise((resolve) => {
          server.closeAllConnections();
          server.close(resolve);
        }),
    ),
  );
});

async function bodyText(body: unknown): Promise<string> {
  let text = '';
  const decoder = new TextDecoder();
  for await (const chunk of body as AsyncIterable<Uint8Array>)
    text += decoder.decode(chunk, { stream: true });
  return text + decoder.decode();
}

// The same behaviour from Node's own fetch and from the transport: the SDKs were written against the first.
describe.each([
  ['Node fetch', fetch],
  ['httpFetch', httpFetch],
] as const)('%s', (_name, fetchImpl) => {
  it('sends the method, headers and text body, and answers with status, headers and JSON', async () => {
    const response = await fetchImpl(`${served.base}/json`, {
      method: 'post',
      headers: new Headers({ 'content-type': 'application/json', authorization: 'Bearer k' }),
      body: '{"a":1}',
    });
    expect(response.status).toBe(201);
    expect(response.ok).toBe(true);
    expect(response.headers.get('x-request-id')).toBe('req-1');
    expect(await response.json()).toEqual({ echoed: '{"a":1}', method: 'POST' });
    const request = served.seen.at(-1)!;
    expect(request.headers.authorization).toBe('Bearer k');
    expect(request.headers['content-type']).toBe('application/json');
  });

  it('takes headers as a record or as pairs, and a body of bytes', async () => {
    await fetchImpl(`${served.base}/json`, {
      method: 'POST',
      headers: { 'x-one': '1' },
      body: new TextEncoder().encode('bytes'),
    });
    expect(served.seen.at(-1)).toMatchObject({ body: 'bytes', headers: { 'x-one': '1' } });
    await fetchImpl(new URL(`${served.base}/json`), { method: 'POST', headers: [['x-two', '2']], body: 'b' });
    expect(served.seen.at(-1)!.headers['x-two']).toBe('2');
  });

  it('answers a 404 as a response that is not ok, with its text', async () => {
    const response = await fetchImpl(`${served.base}/nowhere`);
    expect(response.ok).toBe(false);
    expect(response.status).toBe(404);
    expect(await response.text()).toBe('not here');
  });

  it('decodes a gzip-encoded answer', async () => {
    const response = await fetchImpl(`${served.base}/gzip`);
    expect(await response.json()).toEqual({ packed: 'ünïcode ✓' });
  });

  it('streams the body as it comes, as an async iterable of bytes', async () => {
    const response = await fetchImpl(`${served.base}/sse`);
    expect(await bodyText(response.body)).toBe('data: one\n\ndata: two\n\n');
  });

  it('follows a 307 with the same method and body, and a 303 with a GET and no body', async () => {
    const kept = await fetchImpl(`${served.base}/to/307/json`, { method: 'POST', body: 'again' });
    expect(await kept.json()).toEqual({ echoed: 'again', method: 'POST' });
    expect(kept.redirected).toBe(true);
    const changed = await fetchImpl(`${served.base}/to/303/json`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'dropped',
    });
    expect(await changed.json()).toEqual({ echoed: '', method: 'GET' });
    expect(served.seen.at(-1)!.headers['content-type']).toBeUndefined();
  });

  it('drops the authorization header on a redirect to another origin', async () => {
    const response = await fetchImpl(`${served.base}/elsewhere`, {
      method: 'POST',
      headers: { authorization: 'Bearer secret', 'x-kept': 'yes' },
      body: 'x',
    });
    expect(response.status).toBe(201);
    const request = other.seen.at(-1)!;
    expect(request.headers.authorization).toBeUndefined();
    expect(request.headers['x-kept']).toBe('yes');
  });

  it('rejects a redirect loop with a TypeError', async () => {
    await expect(fetchImpl(`${served.base}/loop`)).rejects.toBeInstanceOf(TypeError);
  });

  it('rejects with an AbortError when the signal aborts before the answer', async () => {
    const controller = new AbortController();
    const pending = fetchImpl(`${served.base}/hang`, { signal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    const already = AbortSignal.abort();
    await expect(fetchImpl(`${served.base}/json`, { signal: already })).rejects.toMatchObject({
      name: 'AbortError',
    });
  });

  it('ends the body with an AbortError when the signal aborts mid-stream', async () => {
    const controller = new AbortController();
    const response = await fetchImpl(`${served.base}/half`, { signal: controller.signal });
    const reading = bodyText(response.body);
    setTimeout(() => controller.abort(), 20);
    await expect(reading).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('rejects a URL it cannot parse with a TypeError, never a throw', async () => {
    let pending: Promise<Response> | undefined;
    expect(() => {
      pending = fetchImpl('not a url');
    }).not.toThrow();
    await expect(pending).rejects.toBeInstanceOf(TypeError);
  });

  it('rejects an unreachable server and a header over the parser limit with a TypeError', async () => {
    await expect(fetchImpl('http://127.0.0.1:9/none')).rejects.toBeInstanceOf(TypeError);
    await expect(fetchImpl(`${served.base}/huge-header`)).rejects.toBeInstanceOf(TypeError);
  });
});

describe('httpFetch', () => {
  it('keeps the connection alive between calls', async () => {
    const before = served.connections.length;
    for (let call = 0; call < 3; call++) await (await httpFetch(`${served.base}/json`)).text();
    expect(served.connections.length - before).toBe(1);
  });

  it('hands bodies other than text and bytes to Node fetch', async () => {
    const form = new FormData();
    form.set('field', 'value');
    await (await httpFetch(`${served.base}/json`, { method: 'POST', body: form })).text();
    const request = served.seen.at(-1)!;
    expect(request.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    expect(request.body).toContain('name="field"');
  });

  it('hands a Request object to Node fetch with its own method, headers and body', async () => {
    const request = new Request(`${served.base}/json`, {
      method: 'PUT',
      headers: { 'x-from-request': 'r' },
      body: 'from a Request',
    });
    expect(await (await httpFetch(request)).json()).toEqual({ echoed: 'from a Request', method: 'PUT' });
    expect(served.seen.at(-1)!.headers['x-from-request']).toBe('r');
  });

  it('leaves out headers whose value is undefined', async () => {
    await (
      await httpFetch(`${served.base}/json`, {
        headers: { 'x-set': 'yes', 'x-unset': undefined } as unknown as Record<string, string>,
      })
    ).text();
    expect(served.seen.at(-1)!.headers).toMatchObject({ 'x-set': 'yes' });
    expect(served.seen.at(-1)!.headers['x-unset']).toBeUndefined();
  });

  it('rejects a scheme other than http and https with a TypeError', async () => {
    await expect(httpFetch('ftp://127.0.0.1/file')).rejects.toBeInstanceOf(TypeError);
  });
});
