/**
 * @file turnfleet.h
 * @brief libturnfleet umbrella header: run coturn as a fleet of TURN relays.
 */
#ifndef TURNFLEET_H
#define TURNFLEET_H

#include "turnfleet/common.h"
#include "turnfleet/errors.h"
#include "turnfleet/version.h"
#include "turnfleet/log.h"
#include "turnfleet/addr.h"
#include "turnfleet/metrics.h"
#include "turnfleet/pool.h"
#include "turnfleet/inventory.h"
#include "turnfleet/plan.h"
#include "turnfleet/capacity.h"
#include "turnfleet/coturn.h"
#include "turnfleet/cred.h"
#include "turnfleet/stun.h"
#include "turnfleet/uri.h"
#include "turnfleet/probe.h"
#include "turnfleet/reconcile.h"
#include "turnfleet/engine.h"
#include "turnfleet/relayctl.h"
#include "turnfleet/kube.h"
#include "turnfleet/informer.h"
#include "turnfleet/manifest.h"
#include "turnfleet/adapter.h"
#include "turnfleet/admission.h"
#include "turnfleet/vantage.h"
#include "turnfleet/issuer.h"

#endif
