package bench

import (
	"context"
)

// petrelMQTTAvailable tells whether this build's node has an MQTT
// listener for the bench to measure without --broker.
func petrelMQTTAvailable() error {
	return usageErrorf("without --broker the bench measures a Petrel node's MQTT listener, which this build does not have yet: " +
		"give --broker tcp://host:port to measure another broker")
}

// roundPetrel measures a Petrel node started for round i.
func (b *mqttBench) roundPetrel(context.Context, int) (MQTTFigures, error) {
	return MQTTFigures{}, petrelMQTTAvailable()
}
