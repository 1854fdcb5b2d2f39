#!/usr/bin/env node
// `npm ci` builds dist/ through the prepare script; this file only hands over to the compiled CLI, bundled
// (scripts/bundle-cli.mjs).
import '../dist/cli-bundle/bin.js';
