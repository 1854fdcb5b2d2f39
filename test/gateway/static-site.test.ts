import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadGatewayServer } from '../../src/gateway/index.js';

let server: Server;
let port: number;
const root = mkdtempSync(join(tmpdir(), 'agentd-site-'));
const site = join(root, 'site');

/** Raw paths: fetch() would normalise `..` away before the server sees it. */
function get(
  path: string,
  method = 'GET',
): Promise<{ status: number; headers: Record<string, any>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, method }, (response) => {
      let body = '';
      response.on('data', (chunk) => (body += chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

beforeAll(async () => {
  mkdirSync(join(site, 'assets'), { recursive: true });
  writeFileSync(join(site, 'index.html'), '<!doctype html><title>x</title>');
  writeFileSync(join(site, 'assets', 'app-1234.js'), 'console.log(1)');
  writeFileSync(join(site, 'assets', 'app-1234.css'), 'body{}');
  writeFileSync(join(root, 'secret.txt'), 'do not serve');
  const { createStaticSite } = await loadGatewayServer();
  const handler = createStaticSite({ dir: site });
  server = createServer((request, response) => {
    if (!handler.handle(request, response)) {
      response.writeHead(404);
      response.end('not found');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('the static site', () => {
  it('serves index.html on / uncached, with the CSP, and hashed assets as immutable', async () => {
    const index = await get('/');
    expect(index.status).toBe(200);
    expect(index.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(index.headers['cache-control']).toBe('no-store');
    expect(index.headers['content-security-policy']).toMatch(/^default-src 'self'/);
    expect(index.headers['x-content-type-options']).toBe('nosniff');
    const script = await get('/assets/app-1234.js');
    expect(script.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(script.headers['cache-control']).toContain('immutable');
    expect((await get('/assets/app-1234.css')).headers['content-type']).toBe('text/css; charset=utf-8');
    const head = await get('/', 'HEAD');
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
  });

  it('never serves anything outside its folder', async () => {
    for (const path of [
      '/../secret.txt',
      '/assets/../../secret.txt',
      '/%2e%2e/secret.txt',
      '/..%2fsecret.txt',
      '/assets/..%5c..%5csecret.txt',
      '/%00index.html',
      '/assets',
      '/missing.js',
    ]) {
      const response = await get(path);
      expect([path, response.status]).toEqual([path, 404]);
      expect(response.body).not.toContain('do not serve');
    }
    expect((await get('/', 'POST')).status).toBe(404);
  });
});
