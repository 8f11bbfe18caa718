#!/usr/bin/env node
import { runCli } from "../cli.js";

// The fixed entry of chapter 2: the unified CLI with `run --chapter 2` put in front.
process.exitCode = await runCli(["run", "--chapter", "2", ...process.argv.slice(2)], undefined, "ch02");
