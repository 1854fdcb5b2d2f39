import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import {
  createPrettyLogStream,
  formatLogLine,
  terminalLogDestination,
  wantsColor,
} from '../../src/cli/pretty-log.js';

const line = JSON.stringify({
  level: 40,
  time: Date.UTC(2026, 0, 1, 12, 0, 1),
  service: 'agentd',
  component: 'store',
  msg: 'applied migration',
  version: 1,
  name: 'core',
  location: '/tmp/a b/agentd.db',
});

describe('logs on a terminal', () => {
  it('reads as time, level, component, message and the other fields, without colour when asked', () => {
    const text = formatLogLine(line, { color: false });
    expect(text).toMatch(
      /^\d\d:\d\d:\d\d WARN {2}store {2}applied migration version=1 name=core location="\/tmp\/a b\/agentd.db"$/,
    );
    expect(text).not.toContain('\u001b[');
    expect(formatLogLine(line, { color: true })).toContain('\u001b[33mWARN ');
    expect(formatLogLine('not json', { color: false })).toBe('not json');
  });

  it('colours only a terminal, and never with NO_COLOR set', () => {
    expect(wantsColor({ isTTY: true }, {})).toBe(true);
    expect(wantsColor({ isTTY: true }, { NO_COLOR: '1' })).toBe(false);
    expect(wantsColor({ isTTY: false }, {})).toBe(false);
    expect(wantsColor({}, {})).toBe(false);
  });

  it('keeps JSON off a terminal or with AGENTD_LOG_FORMAT=json, and splits chunks into whole lines', async () => {
    const pipe = Object.assign(new PassThrough(), { isTTY: false }) as unknown as NodeJS.WriteStream;
    expect(terminalLogDestination(pipe, {})).toEqual({});
    const tty = Object.assign(new PassThrough(), { isTTY: true }) as unknown as NodeJS.WriteStream;
    expect(terminalLogDestination(tty, { AGENTD_LOG_FORMAT: 'json' })).toEqual({});
    expect(terminalLogDestination(tty, {}).logDestination).toBeDefined();

    const out = new PassThrough();
    let text = '';
    out.on('data', (chunk) => {
      text += String(chunk);
    });
    const stream = createPrettyLogStream(out, { color: false });
    stream.write(line.slice(0, 20));
    stream.write(`${line.slice(20)}\n${line}`);
    await new Promise<void>((resolve) => stream.end(resolve));
    expect(text.trim().split('\n')).toHaveLength(2);
    expect(text).not.toContain('{');
  });
});
