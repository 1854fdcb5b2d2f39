import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { rawRequest, type StartedGateway, startGateway, upgradeRequest } from './helpers.js';

let gateway: StartedGateway | undefined;

afterEach(async () => {
  await gateway?.runtime.close();
  gateway = undefined;
});

describe('DNS rebinding against a --no-auth gateway', () => {
  it('refuses OpenClaw and Spiderweb upgrades whose Host is not loopback, even with a matching Origin', async () => {
    gateway = await startGateway({ noAuth: true });
    const { port } = gateway;
    const attacker = { Host: `evil.example:${port}`, Origin: `http://evil.example:${port}` };
    for (const path of ['/', '/ws', '/v1/agents/main/stream?session=rebound']) {
      const response = await rawRequest(port, upgradeRequest(path, attacker));
      expect(response.status, path).toBe(421);
      expect(response.body).toMatch(/allowedHosts/);
    }
    // A rebound page may also try without an Origin header (a non-browser fetch would have one): still refused.
    const noOrigin = await rawRequest(port, upgradeRequest('/', { Host: `evil.example:${port}` }));
    expect(noOrigin.status).toBe(421);
    // The wrong port on a loopback name is not ours either.
    const wrongPort = await rawRequest(port, upgradeRequest('/', { Host: `localhost:${port + 1}` }));
    expect(wrongPort.status).toBe(421);
  });

  it('refuses HTTP endpoints that expose data to a rebound Host', async () => {
    gateway = await startGateway({ noAuth: true });
    const { port } = gateway;
    for (const path of ['/health', '/metrics']) {
      const response = await rawRequest(port, [
        `GET ${path} HTTP/1.1`,
        `Host: evil.example:${port}`,
        `Origin: http://evil.example:${port}`,
        'Connection: close',
      ]);
      expect(response.status, path).toBe(421);
      expect(response.body).not.toMatch(/agentd\.db|store/);
    }
  });

  it('still serves loopback names: 127.0.0.1, localhost and [::1] with the gateway port', async () => {
    gateway = await startGateway({ noAuth: true });
    const { port } = gateway;
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]) {
      const response = await rawRequest(port, upgradeRequest('/', { Host: host, Origin: `http://${host}` }));
      expect(response.status, host).toBe(101);
    }
    const client = new WebSocket(`ws://localhost:${port}/`);
    const challenge = await new Promise<any>((resolve, reject) => {
      client.once('message', (data) => resolve(JSON.parse(String(data))));
      client.once('error', reject);
    });
    expect(challenge.event).toBe('connect.challenge');
    client.close();
  });

  it('serves names listed in gateway.allowedHosts, and only those', async () => {
    gateway = await startGateway({
      yaml: 'gateway:\n  allowedHosts: [agentd.example.com, "ui.example.com:8443"]\n',
    });
    const { port, token } = gateway;
    const allowed = await rawRequest(
      port,
      upgradeRequest(`/v1/agents/main/stream?token=${token}`, {
        Host: 'agentd.example.com',
        Origin: 'https://agentd.example.com',
      }),
    );
    expect(allowed.status).toBe(101);
    const pinned = await rawRequest(port, upgradeRequest('/', { Host: 'ui.example.com:8443' }));
    expect(pinned.status).toBe(101);
    const otherPort = await rawRequest(port, upgradeRequest('/', { Host: 'ui.example.com:9999' }));
    expect(otherPort.status).toBe(421);
    const evil = await rawRequest(port, upgradeRequest('/', { Host: 'evil.example' }));
    expect(evil.status).toBe(421);
  });
});

describe('GET /health', () => {
  it('tells callers without the token only the status, and token holders everything', async () => {
    gateway = await startGateway();
    const { port, token, home } = gateway;
    const anonymous = await rawRequest(port, ['GET /health HTTP/1.1', `Host: 127.0.0.1:${port}`]);
    expect(anonymous.status).toBe(200);
    const summary = JSON.parse(anonymous.body);
    expect(Object.keys(summary).sort()).toEqual(['status', 'version']);
    expect(summary.status).toBe('ok');
    expect(anonymous.body).not.toContain(home);
    const wrong = await rawRequest(port, [
      'GET /health HTTP/1.1',
      `Host: 127.0.0.1:${port}`,
      'Authorization: Bearer not-the-token',
    ]);
    expect(Object.keys(JSON.parse(wrong.body)).sort()).toEqual(['status', 'version']);
    const full = await rawRequest(port, [
      'GET /health HTTP/1.1',
      `Host: 127.0.0.1:${port}`,
      `Authorization: Bearer ${token}`,
    ]);
    const document = JSON.parse(full.body);
    expect(document.store.location).toContain(home);
    expect(document.model).toBeDefined();
  });
});

describe('idle sockets before the HTTP request', () => {
  it('closes a TCP connection that never sends a request', async () => {
    gateway = await startGateway({ yaml: 'gateway:\n  limits:\n    requestTimeoutMs: 300\n' });
    const socket = connect(gateway.port, '127.0.0.1');
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    await closed;
    expect(socket.destroyed).toBe(true);
  });

  it('closes a connection that trickles an incomplete request head', async () => {
    gateway = await startGateway({ yaml: 'gateway:\n  limits:\n    requestTimeoutMs: 300\n' });
    const socket = connect(gateway.port, '127.0.0.1');
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    const timer = setInterval(() => socket.write('X-Slow: 1\r\n'), 50);
    await closed;
    clearInterval(timer);
    expect(socket.destroyed).toBe(true);
  });
});

describe('Spiderweb session.capabilities', () => {
  it('stays bounded however many capabilities a connection declares', async () => {
    gateway = await startGateway();
    const client = new WebSocket(`${gateway.url}/v1/agents/main/stream?session=caps&token=${gateway.token}`);
    const frames: any[] = [];
    const waiters: Array<() => void> = [];
    client.on('message', (data) => {
      frames.push(JSON.parse(String(data)));
      for (const waiter of waiters.splice(0)) waiter();
    });
    const next = async (predicate: (frame: any) => boolean) => {
      for (;;) {
        const found = frames.find(predicate);
        if (found) return found;
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    };
    await next((frame) => frame.type === 'session.ack');
    const declare = async (id: string, capabilities: string[]) => {
      client.send(JSON.stringify({ type: 'session.capabilities', id, capabilities }));
      return await next((frame) => frame.type === 'session.capabilities' && frame.request === id);
    };
    await declare('first', ['stream', 'stream', 'tool-events']);
    for (let round = 0; round < 100; round++) {
      await declare(
        `r${round}`,
        Array.from({ length: 64 }, (_, index) => `cap-${round}-${index}`),
      );
    }
    const last = await declare('last', ['stream']);
    expect(last.capabilities.length).toBeLessThanOrEqual(64);
    expect(new Set(last.capabilities).size).toBe(last.capabilities.length);
    // What was declared before the flood is kept.
    expect(last.capabilities).toEqual(expect.arrayContaining(['stream', 'tool-events']));
    client.close();
  });
});
