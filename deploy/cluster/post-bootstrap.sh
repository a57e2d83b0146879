#!/bin/sh
# Patroni's post_bootstrap hook: runs once, on the host that initialised the cluster, with a
# connection string to it as $1. Creates the database the mosaicdb servers use.
set -eu
psql -X -v ON_ERROR_STOP=1 -d "$1" -c "CREATE DATABASE mosaic"
