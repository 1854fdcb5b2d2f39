import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { tempHome } from '../runtime/helpers.js';
import { calcServerPath } from './helpers.js';

describe('agentd mcp list', () => {
  it('shows each server with its state and tools, and fails when one is down', async () => {
    const home = tempHome('agentd-mcp-cli-');
    const configPath = join(home, 'agentd.yaml');
    writeFileSync(
      configPath,
      [
        'mcp:',
        '  connect_timeout_ms: 10000',
        '  servers:',
        `    calc: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(calcServerPath)}] }`,
        '    gone: { command: /nonexistent/mcp-server }',
        '    off: { url: http://127.0.0.1:9/mcp, enabled: false }',
      ].join('\n'),
    );
    let out = '';
    const code = await main(['node', 'agentd', '--home', home, '-c', configPath, 'mcp', 'list', '--json'], {
      stdout: (text) => {
        out += text;
      },
      stderr: () => {},
    });
    const { servers } = JSON.parse(out) as {
      servers: Array<{ name: string; state: string; tools: Array<{ name: string }>; lastError?: string }>;
    };
    expect(servers.map((server) => [server.name, server.state])).toEqual([
      ['calc', 'ready'],
      ['gone', 'failed'],
      ['off', 'disabled'],
    ]);
    expect(servers[0]!.tools.map((tool) => tool.name)).toEqual([
      'mcp__calc__add',
      'mcp__calc__env',
      'mcp__calc__grow',
      'mcp__calc__crash',
      'mcp__calc__pid',
    ]);
    expect(servers[1]!.lastError).toMatch(/ENOENT/);
    expect(code).toBe(3);
  });
});
