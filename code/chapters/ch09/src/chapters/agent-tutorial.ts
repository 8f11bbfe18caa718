#!/usr/bin/env node
import { runCli } from "../cli.js";

// The unified entry: `agent-tutorial run --chapter N [options]` runs this snapshot's CLI with chapter N's profile.
process.exitCode = await runCli(process.argv.slice(2));
