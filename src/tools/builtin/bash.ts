import { z } from 'zod';
import { childEnvironment, type IsolationChoice, spawnIsolated } from '../child-process.js';
import { defineTool, type ToolDefinition } from '../tool.js';

export interface BashToolOptions {
  /** Default and maximum run time of one command. */
  timeoutMs?: number;
  /** stdout and stderr are each cut at this size. */
  maxOutputBytes?: number;
  shell?: string;
  /**
   * Extra environment of the command. Of agentd's own environment only PATH, LANG and TZ are passed, HOME
   * is the workspace, so no secret leaks in.
   */
  env?: Record<string, string>;
  /** How the command is started (see ChildIsolation and IsolationChoice); default `none`. */
  isolation?: IsolationChoice;
}

/**
 * `bash {command, timeout_ms?}` in the workspace directory. Off unless configured: it is not a sandbox (the
 * command can read anything the agentd user can); use policy rules or the sandbox for untrusted agents.
 */
export function createBashTool(options: BashToolOptions = {}): ToolDefinition {
  const maxTimeoutMs = options.timeoutMs ?? 30_000;
  const maxOutputBytes = options.maxOutputBytes ?? 64 * 1024;
  const shell = options.shell ?? '/bin/bash';
  return defineTool({
    name: 'bash',
    description: 'Run a shell command in the workspace directory. Returns exit code, stdout and stderr.',
    examples: [{ command: 'ls -la', timeout_ms: 10_000 }],
    input: z.object({
      command: z.string().min(1),
      timeout_ms: z.number().int().min(1).optional().describe(`At most ${maxTimeoutMs}`),
    }),
    policyResource: (args) => args.command,
    execute(args, context) {
      const timeoutMs = Math.min(args.timeout_ms ?? maxTimeoutMs, maxTimeoutMs);
      return new Promise((resolve) => {
        const started = Date.now();
        // Own process group so a timeout or abort kills the command's children too.
        const child = spawnIsolated(shell, ['-c', args.command], {
          isolation: options.isolation ?? 'none',
          cwd: context.workspaceDir,
          env: childEnvironment({
            home: context.workspaceDir,
            ...(options.env ? { configured: options.env } : {}),
          }),
          stdio: ['ignore', 'pipe', 'pipe'],
          detached: true,
        });
        const collected = { stdout: [] as Buffer[], stderr: [] as Buffer[], stdoutBytes: 0, stderrBytes: 0 };
        let stopReason: 'timeout' | 'aborted' | undefined;
        const killGroup = () => {
          try {
            process.kill(-child.pid!, 'SIGKILL');
          } catch {
            // The group is already gone.
          }
        };
        const timer = setTimeout(() => {
          stopReason = 'timeout';
          killGroup();
        }, timeoutMs);
        const onAbort = () => {
          stopReason = 'aborted';
          killGroup();
        };
        context.signal.addEventListener('abort', onAbort, { once: true });
        const keep = (stream: 'stdout' | 'stderr') => (chunk: Buffer) => {
          const bytesKey = stream === 'stdout' ? 'stdoutBytes' : 'stderrBytes';
          const room = maxOutputBytes - collected[bytesKey];
          if (room > 0) collected[stream].push(chunk.subarray(0, room));
          collected[bytesKey] += chunk.length;
        };
        child.stdout!.on('data', keep('stdout'));
        child.stderr!.on('data', keep('stderr'));
        const render = (stream: 'stdout' | 'stderr') => {
          const bytes = stream === 'stdout' ? collected.stdoutBytes : collected.stderrBytes;
          const text = Buffer.concat(collected[stream]).toString('utf8');
          return bytes > maxOutputBytes ? `${text}\n[… ${bytes - maxOutputBytes} more bytes cut]` : text;
        };
        const done = (exitCode: number | null, error?: Error) => {
          clearTimeout(timer);
          context.signal.removeEventListener('abort', onAbort);
          const header = error
            ? `failed to start: ${error.message}`
            : stopReason === 'timeout'
              ? `timed out after ${timeoutMs} ms (killed)`
              : stopReason === 'aborted'
                ? 'aborted (killed)'
                : `exit_code: ${exitCode}`;
          resolve({
            content: `${header}\nduration_ms: ${Date.now() - started}\nstdout:\n${render('stdout')}\nstderr:\n${render('stderr')}`,
            isError: error !== undefined || stopReason !== undefined || exitCode !== 0,
          });
        };
        child.on('error', (error) => done(null, error));
        child.on('close', (code) => done(code));
      });
    },
  });
}
