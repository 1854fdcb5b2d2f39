import type { Ledger } from '../../ledger/index.js';
import type { ToolDefinition } from '../tool.js';
import { type BashToolOptions, createBashTool } from './bash.js';
import { createFileTools, type FileToolsOptions } from './files.js';
import { createHttpFetchTool, type HttpFetchToolOptions } from './http-fetch.js';
import { createLedgerTools } from './ledger.js';
import { createMemoryTools, type MemoryToolBackend } from './memory.js';

export interface BuiltinToolsOptions {
  /** Adds ledger_append and ledger_read. */
  ledger?: Ledger;
  /** Adds memory_search and memory_get. */
  memory?: MemoryToolBackend;
  /** File tools are on unless `false`. */
  files?: FileToolsOptions | false;
  /** Off unless given with `enabled: true`. */
  bash?: BashToolOptions & { enabled: boolean };
  /** Off unless given with `enabled: true`; even then only the allowlisted hosts are reachable. */
  httpFetch?: HttpFetchToolOptions & { enabled: boolean };
}

/** The built-in tool set for one agent, honouring the off-by-default tools. */
export function createBuiltinTools(options: BuiltinToolsOptions = {}): ToolDefinition[] {
  const tools: ToolDefinition[] = [];
  if (options.ledger) tools.push(...createLedgerTools(options.ledger));
  if (options.memory) tools.push(...createMemoryTools(options.memory));
  if (options.files !== false) tools.push(...createFileTools(options.files ?? {}));
  if (options.bash?.enabled) tools.push(createBashTool(options.bash));
  if (options.httpFetch?.enabled) tools.push(createHttpFetchTool(options.httpFetch));
  return tools;
}
