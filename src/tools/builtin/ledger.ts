import { z } from 'zod';
import { formatLedgerEntries, type Ledger, ledgerEntryTypes } from '../../ledger/index.js';
import { defineTool, type ToolDefinition } from '../tool.js';

const noWorkItem = {
  content:
    'This run has no work item, so it has no ledger. (The runtime gives every run one; report this as a bug.)',
  isError: true,
};

/** `ledger_append {entry_type, content}` and `ledger_read {entry_type?, last_n?}` on the run's work item. */
export function createLedgerTools(ledger: Ledger): ToolDefinition[] {
  const append = defineTool({
    name: 'ledger_append',
    description:
      'Record progress in your work ledger, which survives context compaction. entry_type: plan (your current plan), ' +
      'finding (a fact you learned), decision (a choice and why), step (a completed step: closes the current context ' +
      'block, whose messages are then replaced by this summary), error (something that failed), note (anything else).',
    examples: [{ entry_type: 'finding', content: 'The build uses Node 20; the lockfile pins vitest 3.' }],
    input: z.object({
      entry_type: z.enum(ledgerEntryTypes),
      content: z
        .string()
        .min(1)
        .describe('Self-contained: it may be all that remains of this part of the work'),
    }),
    async execute(args, context) {
      if (!context.workItemId) return noWorkItem;
      const entry = await ledger.append(context.workItemId, {
        entryType: args.entry_type,
        content: args.content,
      });
      return {
        content: `Recorded ${entry.entryType} #${entry.seq}.`,
        metadata: {
          ledgerEntry: {
            workItemId: entry.workItemId,
            seq: entry.seq,
            entryType: entry.entryType,
            content: entry.content,
          },
        },
      };
    },
  });
  const read = defineTool({
    name: 'ledger_read',
    description:
      'Read your work ledger (this work item, including earlier attempts): lines "[seq] type: content".',
    examples: [{ entry_type: 'plan', last_n: 1 }],
    input: z.object({
      entry_type: z.enum(ledgerEntryTypes).optional(),
      last_n: z.number().int().min(1).optional(),
    }),
    async execute(args, context) {
      if (!context.workItemId) return noWorkItem;
      const entries = await ledger.read(context.workItemId, {
        entryType: args.entry_type,
        lastN: args.last_n,
      });
      return entries.length ? formatLedgerEntries(entries) : 'The ledger is empty.';
    },
  });
  return [append, read];
}
