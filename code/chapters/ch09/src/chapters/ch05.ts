#!/usr/bin/env node
import { runProfile } from "../cli.js";
import { P05 } from "../core/profiles.js";

process.exitCode = await runProfile(P05, process.argv.slice(2));
