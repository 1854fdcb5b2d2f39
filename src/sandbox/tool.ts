import './events.js';
import { z } from 'zod';
import { markSpanFailed, runInSpan, SpanAttributes, withSpan } from '../telemetry/index.js';
import { defineTool, type ToolContext, type ToolDefinition } from '../tools/index.js';
import {
  type Clock,
  createIdGenerator,
  type IdGenerator,
  parseUntrustedJson,
  systemClock,
} from '../util/index.js';
import type { SandboxConfig } from './config.js';
import type { SandboxExecutionResult, SandboxPool } from './pool.js';
import { type SandboxFile, type SandboxLanguage, sandboxLanguages } from './protocol.js';

export interface ExecuteCodeToolOptions {
  pool: SandboxPool;
  config: SandboxConfig;
  clock?: Clock;
  idGenerator?: IdGenerator;
}

export const executeCodeToolName = 'execute_code';

const argumentsSchema = z.record(z.string(), z.unknown());
const maxToolArgumentBytes = 1024 * 1024;

const description = (languages: readonly SandboxLanguage[]) =>
  'Run a short program that can call your other tools in loops and conditions; only what it returns (and ' +
  'prints) comes back to you, so use it to batch or filter many tool calls. ' +
  (languages.includes('javascript')
    ? 'javascript: the code is the body of an async function; `return` the result; call tools with ' +
      '`await tools.ledger_append({entry_type: "finding", content: "..."})`; console.log prints. '
    : '') +
  (languages.includes('python')
    ? 'python: the value of the last expression is the result; top-level await works; call tools with ' +
      '`await tools.ledger_append(entry_type="finding", content="...")`; print() prints; standard library only. '
    : '') +
  "A tool call returns the tool's text and raises ToolError when the tool fails or is denied. No network, " +
  'no processes, no host files (granted workspace files are under /workspace in Python and in `files` in ' +
  'JavaScript). Results are JSON.';

/** `execute_code {language, code, timeoutMs?}`: runs model-written code in the sandbox pool. */
export function createExecuteCodeTool(options: ExecuteCodeToolOptions): ToolDefinition {
  const { pool, config } = options;
  const clock = options.clock ?? systemClock;
  const ids = options.idGenerator ?? createIdGenerator();
  const languages = config.languages;
  const enabled = languages.filter((language) => sandboxLanguages.includes(language)) as [
    SandboxLanguage,
    ...SandboxLanguage[],
  ];

  return defineTool({
    name: executeCodeToolName,
    description: description(enabled),
    examples: [
      enabled[0] === 'python'
        ? { language: 'python', code: 'len(await tools.list_files(path="."))' }
        : { language: enabled[0], code: 'return (await tools.list_files({ path: "." })).length;' },
    ],
    input: z.object({
      language: z.enum(enabled),
      code: z.string().min(1).max(200_000),
      timeoutMs: z
        .number()
        .int()
        .positive()
        .max(config.max_timeout_ms)
        .optional()
        .describe(`Wall-time limit; default ${config.timeout_ms}`),
    }),
    policyResource: (args) => args.language,
    execute: (args, context) => {
      const executionId = ids('exec');
      // A child of the `execute_tool execute_code` span; the program's own tool calls are its children.
      return withSpan(
        `code_run ${args.language}`,
        {
          attributes: {
            [SpanAttributes.codeLanguage]: args.language,
            [SpanAttributes.executionId]: executionId,
          },
        },
        async (span) => {
          const scope = {
            runId: context.runId,
            agentId: context.agentId,
            ...(context.sessionKey !== undefined ? { sessionKey: context.sessionKey } : {}),
            ...(context.workItemId !== undefined ? { workItemId: context.workItemId } : {}),
          };
          const files = await loadFiles(config, context);
          const calls: Array<{ id: string; name: string; status: string }> = [];
          let refusedOverLimit = 0;

          const onToolCall = async (name: string, argsJson: string) => {
            if (calls.length >= config.max_tool_calls) {
              refusedOverLimit++;
              return {
                ok: false,
                content: `Tool call limit reached: a program may make ${config.max_tool_calls} tool calls.`,
              };
            }
            const id = `${context.toolCallId}.${calls.length + 1}`;
            const record = { id, name, status: 'error' };
            calls.push(record);
            if (name === executeCodeToolName) {
              record.status = 'denied';
              return { ok: false, content: 'execute_code cannot be called from inside a program.' };
            }
            if (!context.callTool) {
              return { ok: false, content: 'Tools cannot be called from code in this run.' };
            }
            let parsedArgs: Record<string, unknown>;
            try {
              parsedArgs = parseUntrustedJson(argsJson, argumentsSchema, { maxBytes: maxToolArgumentBytes });
            } catch (error) {
              record.status = 'invalid_arguments';
              return { ok: false, content: `Invalid arguments for ${name}: ${(error as Error).message}` };
            }
            const startedAt = clock.now();
            // Called from the worker's message handler, outside the run's context: the parent is explicit.
            const outcome = await runInSpan(span, () =>
              context.callTool!({ id, name, arguments: parsedArgs }),
            );
            record.status = outcome.status;
            context.bus.publish(
              'sandbox:tool-call',
              {
                runId: context.runId,
                executionId,
                toolCallId: id,
                toolName: name,
                status: outcome.status,
                durationMs: clock.now() - startedAt,
              },
              scope,
            );
            return { ok: !outcome.isError, content: outcome.content };
          };

          context.bus.publish(
            'sandbox:started',
            {
              runId: context.runId,
              executionId,
              toolCallId: context.toolCallId,
              language: args.language,
              codeBytes: Buffer.byteLength(args.code),
            },
            scope,
          );
          let result = await pool.execute({
            language: args.language,
            code: args.code,
            executionId,
            timeoutMs: Math.min(args.timeoutMs ?? config.timeout_ms, config.max_timeout_ms),
            maxOutputBytes: config.max_output_bytes,
            maxResultBytes: config.max_result_bytes,
            files,
            onToolCall,
            signal: context.signal,
          });
          if (refusedOverLimit > 0 && result.ok) {
            result = {
              ...result,
              ok: false,
              error: {
                kind: 'limit',
                message: `The program tried ${config.max_tool_calls + refusedOverLimit} tool calls; only ${config.max_tool_calls} are allowed per execution and the rest were refused.`,
              },
            };
          }
          const written = await writeBack(result, files, context);
          context.bus.publish(
            'sandbox:finished',
            {
              runId: context.runId,
              executionId,
              toolCallId: context.toolCallId,
              language: args.language,
              ok: result.ok,
              ...(result.error ? { errorKind: result.error.kind } : {}),
              wallMs: result.wallMs,
              cpuMs: result.cpuMs,
              toolCalls: calls.length,
              coldStart: result.coldStart,
            },
            scope,
          );
          const report = {
            ...(result.ok
              ? { result: JSON.parse(result.resultJson ?? 'null') as unknown }
              : { error: result.error }),
            ...(result.stdout ? { stdout: result.stdout } : {}),
            ...(result.stderr ? { stderr: result.stderr } : {}),
            ...(result.outputTruncated ? { outputTruncated: true } : {}),
            toolCalls: calls,
            ...(written.length ? { filesWritten: written } : {}),
            wallMs: Math.round(result.wallMs),
            cpuMs: Math.round(result.cpuMs),
          };
          if (result.error) markSpanFailed(span, result.error.kind);
          return { content: JSON.stringify(report), isError: !result.ok };
        },
      );
    },
  });
}

/** Granted files come in through `read_file`, so policy rules on paths and hooks apply to them too. */
async function loadFiles(config: SandboxConfig, context: ToolContext): Promise<SandboxFile[]> {
  if (config.files.length === 0 || !context.callTool) return [];
  const files: SandboxFile[] = [];
  for (const [index, grant] of config.files.entries()) {
    const outcome = await context.callTool({
      id: `${context.toolCallId}.file${index + 1}`,
      name: 'read_file',
      arguments: { path: grant.path },
    });
    if (outcome.isError) continue;
    files.push({
      path: grant.path.replace(/^\.?\/+/, ''),
      content: outcome.content,
      writable: grant.writable,
    });
  }
  return files;
}

async function writeBack(
  result: SandboxExecutionResult,
  files: SandboxFile[],
  context: ToolContext,
): Promise<string[]> {
  const writable = new Set(files.filter((file) => file.writable).map((file) => file.path));
  const written: string[] = [];
  for (const [index, file] of result.writtenFiles.entries()) {
    if (!writable.has(file.path) || !context.callTool) continue;
    const outcome = await context.callTool({
      id: `${context.toolCallId}.write${index + 1}`,
      name: 'write_file',
      arguments: { path: file.path, content: file.content },
    });
    if (!outcome.isError) written.push(file.path);
  }
  return written;
}
