import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';

/** "Billion laughs": nine levels of nine aliases each expand to 9^9 strings from a few hundred bytes. */
function billionLaughs(key: string): string {
  const lines = ['x-lol: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
  let previous = 'a';
  for (const name of 'bcdefghi') {
    lines.push(`x-${name}: &${name} [${Array(9).fill(`*${previous}`).join(', ')}]`);
    previous = name;
  }
  lines.push(`${key}: *${previous}`);
  return `${lines.join('\n')}\n`;
}

async function runCli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(['node', 'agentd', ...args], {
    stdout: (text) => {
      out += text;
    },
    stderr: (text) => {
      err += text;
    },
  });
  return { code, out, err };
}

const exampleDir = resolve(import.meta.dirname, '../../examples/mini-editor');

describe('YAML bombs are configuration errors, not crashes', () => {
  it('agentd.yaml: the CLI answers INVALID_CONFIG', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentd-sec-yaml-'));
    const path = join(dir, 'agentd.yaml');
    writeFileSync(path, billionLaughs('memory'));
    const { code, out } = await runCli(['--home', dir, '--config', path, 'doctor', '--json']);
    expect(code).toBe(2);
    expect(JSON.parse(out).error.code).toBe('INVALID_CONFIG');
  });

  it('agentd.yaml: a file past the size limit is INVALID_CONFIG', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentd-sec-yaml-'));
    const path = join(dir, 'agentd.yaml');
    writeFileSync(path, `# ${'x'.repeat(2 * 1024 * 1024)}\nport: 1\n`);
    const { code, out } = await runCli(['--home', dir, '--config', path, 'doctor', '--json']);
    expect(code).toBe(2);
    expect(JSON.parse(out).error.code).toBe('INVALID_CONFIG');
  });

  for (const file of ['workflow.yaml', 'agents.yaml', 'tools.yaml']) {
    it(`workflow manifest ${file}: \`agentd workflow validate\` reports an invalid workflow`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'agentd-sec-wf-'));
      cpSync(exampleDir, dir, { recursive: true });
      writeFileSync(join(dir, file), billionLaughs('nodes'));
      const { code, out } = await runCli(['workflow', 'validate', dir, '--json']);
      const report = JSON.parse(out);
      expect(report.error?.code ?? 'INVALID_CONFIG').toBe('INVALID_CONFIG');
      expect(report.valid).toBe(false);
      expect(report.issues.map((issue: { file: string }) => issue.file)).toContain(file);
      expect(code).toBe(2);
    });
  }
});
