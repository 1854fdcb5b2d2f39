import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { prepareToolSafety } from '../../src/runtime/tool-safety.js';
import { toolsConfigSchema } from '../../src/tools/index.js';
import { createRecordingLogger } from '../../src/util/index.js';

const launcher = vi.hoisted(() => ({ answer: null as string | null, calls: 0 }));
vi.mock('../../src/tools/index.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('../../src/tools/index.js')>()),
  namespaceLauncher: () => {
    launcher.calls++;
    return launcher.answer;
  },
}));

function prepare(tools: Record<string, unknown>, hookFiles: string[] = []) {
  const home = mkdtempSync(join(tmpdir(), 'agentd-tool-safety-'));
  mkdirSync(join(home, 'hooks'));
  for (const name of hookFiles) writeFileSync(join(home, 'hooks', name), '#!/bin/sh\n');
  const logger = createRecordingLogger();
  const safety = prepareToolSafety({
    tools: toolsConfigSchema.parse(tools),
    home,
    workspaceDir: join(home, 'workspace'),
    configPath: undefined,
    logger,
  });
  const warnings = () =>
    logger.records.filter((record) => record.level === 'warn').map((record) => record.message);
  return { safety, warnings };
}

describe('how hooks and bash start their children', () => {
  beforeEach(() => {
    launcher.answer = null;
    launcher.calls = 0;
  });

  it('probes unshare at the first child when nothing could start one at start, and warns then', () => {
    const { safety, warnings } = prepare({});
    expect(launcher.calls).toBe(0);
    expect(warnings()).toEqual([]);
    expect(safety.isolation()).toBe('none');
    expect(safety.isolation()).toBe('none');
    expect(launcher.calls).toBe(1);
    expect(warnings()).toEqual([expect.stringMatching(/unshare with user namespaces is not available/)]);
  });

  it.each([
    ['bash is on', { bash: { enabled: true } }, []],
    ['the hooks directory holds a file', {}, ['before_tool_call']],
  ])('probes at start when %s, so the warning comes with the start', (_label, tools, hookFiles) => {
    const { safety, warnings } = prepare(tools, hookFiles);
    expect(launcher.calls).toBe(1);
    expect(warnings()).toHaveLength(1);
    expect(safety.isolation()).toBe('none');
    expect(launcher.calls).toBe(1);
  });

  it('isolates children in namespaces where unshare works', () => {
    launcher.answer = '/usr/bin/unshare';
    expect(prepare({}).safety.isolation()).toBe('namespace');
    expect(prepare({ isolation: 'namespace' }).safety.isolation()).toBe('namespace');
  });

  it('refuses to start with isolation: namespace where unshare does not work, and never probes for none', () => {
    expect(() => prepare({ isolation: 'namespace' })).toThrow(/tools.isolation is namespace/);
    launcher.calls = 0;
    const { safety, warnings } = prepare({ isolation: 'none', bash: { enabled: true } });
    expect(safety.isolation()).toBe('none');
    expect(launcher.calls).toBe(0);
    expect(warnings()).toEqual([expect.stringMatching(/tools.isolation is none/)]);
  });
});
