export {
  type CreateLedgerOptions,
  createLedger,
  formatLedgerEntries,
  type Ledger,
  type LedgerEntry,
  type LedgerEntryType,
  type LedgerReadOptions,
  ledgerEntryTypes,
} from './ledger.js';
