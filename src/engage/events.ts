declare module '../bus/events.js' {
  interface BusEventMap {
    /**
     * The run's context was made smaller. `step`: a closed block became its summary; `threshold`: rebuilt from
     * the ledger; `emergency`: older messages were summarised by the model.
     */
    'engage:compacted': {
      runId: string;
      trigger: 'step' | 'threshold' | 'emergency';
      tokensBefore: number;
      tokensAfter: number;
      messagesBefore: number;
      messagesAfter: number;
      ledgerEntriesUsed: number;
    };
    /** The agent went `turnsWithoutLedgerWrite` turns without writing its ledger and was reminded. */
    'engage:nudged': { runId: string; turnsWithoutLedgerWrite: number };
  }
}

export {};
